"""The paper's claims the course tests (and a few of follow-up work, marked "beyond the paper"): each claim's
statement, where the paper makes it, the scale of the paper's evidence (models, data, compute: what a miniature that
does not reproduce it is set beside) and the notebook that tests it. `course.claims` builds the report."""

# the scale of the evidence behind two claims each (one place for each fact)
_TABLE8 = (
    "ViT-B/16 pre-trained on JFT-300M on a 14x14 grid of patches, read by ImageNet 5-shot linear accuracy (Table 8)"
)
_FIG7_CENTRE = "ViT-L/32 pre-trained on JFT-300M (Fig. 7 centre)"
_FIG5_HYBRIDS = (
    "ViTs, hybrids and ResNets of many sizes pre-trained for 7 epochs on JFT-300M, over two orders of magnitude of "
    "compute (Fig. 5)"
)
_NO_EXPERIMENT = "no experiment of the paper: §3.1 argues it from the architecture"
_DINO = "ViT-S/16 and ViT-B/8 trained for 100 to 800 epochs on ImageNet's 1.28M images (Caron et al. 2021)"

# id -> the paper's statement, where it is, the scale of its evidence, and the notebook that tests it; `demonstration`:
# why the outcome is decided by the design (the run shows a mechanism; the report keeps it apart from the verdicts and
# from Holm's count)
CLAIMS = {
    "a1": dict(
        claim="ViT trails a ResNet of similar size when trained on little data",
        paper="§4.3, Fig. 3 (ImageNet only: below BiT), Fig. 4 (9M JFT images: ViT-B/32 much worse than ResNet50)",
        scale="ViT-B/32 against ResNet50 on random JFT-300M subsets of 9M to 300M images (Fig. 4); ViT-B to ViT-H "
        "against BiT ResNets pre-trained on 1.3M, 14M and 300M images (Fig. 3)",
        notebook="08_data_size",
    ),
    "a2": dict(
        claim="the ResNet's lead over ViT shrinks as the training set grows",
        paper="§4.3, Fig. 3-4 (ViT ahead from 90M JFT images on)",
        scale="the same models and data as a1: the crossing lies between 9M and 90M JFT images (Fig. 4)",
        notebook="08_data_size",
    ),
    "a3": dict(
        claim="on a task that needs relations between distant patches, ViT gains more from data than a ResNet",
        paper="§3.1 (inductive bias), §4.3; a mechanism miniature, not an experiment of the paper",
        scale="no experiment of the paper: §3.1's argument about the CNN's locality",
        notebook="08_data_size",
        demonstration="a ResNet that ends in global average pooling cannot compare two distant glyphs, so the task "
        "decides which model gains: it shows the bet an inductive bias makes, it does not test the paper",
    ),
    "a4": dict(
        claim="in a few-shot linear probe of the frozen features, ViT trails a ResNet of similar size when trained on "
        "little data",
        paper="§4.3, Fig. 4 (linear 5-shot ImageNet of models pre-trained on JFT subsets: ViT-B/32 much worse than "
        "ResNet50 at 9M images, better from 90M on)",
        scale="linear 5-shot ImageNet probes of ViT-B/32 and ResNet50 pre-trained on JFT-300M subsets of 9M to 300M "
        "images (Fig. 4)",
        notebook="08_data_size",
    ),
    "a5": dict(
        claim="a larger ViT trails a smaller one when trained on little data",
        paper="§4.3, Fig. 3 (pre-trained on ImageNet alone, ViT-L below ViT-B 'despite (moderate) regularization')",
        scale="ViT-B and ViT-L pre-trained on ImageNet's 1.3M images (Fig. 3)",
        notebook="10_patch_size_and_shape",
    ),
    "a6": dict(
        claim="a larger ViT gains more from more data than a smaller one",
        paper="§4.3, Fig. 3 (about equal on ImageNet-21k; 'only with JFT-300M, do we see the full benefit of larger "
        "models')",
        scale="ViT-B to ViT-H pre-trained on 1.3M, 14M and 300M images (Fig. 3)",
        notebook="10_patch_size_and_shape",
    ),
    "b1": dict(
        claim="without position embeddings ViT does worse",
        paper="App. D.4, Table 8 (0.614 vs 0.642)",
        scale=_TABLE8,
        notebook="09_position_embeddings",
    ),
    "b2": dict(
        claim="1D, 2D and relative position embeddings work about equally well",
        paper="App. D.4, Table 8 (0.642, 0.640, 0.640)",
        scale=_TABLE8,
        notebook="09_position_embeddings",
    ),
    "c1": dict(
        claim="the [class] token and global average pooling work about equally well, each at its own learning rate",
        paper="App. D.3, Fig. 9",
        scale="ViT-B/16 pre-trained for up to 7 epochs on the paper's large pre-training data, read by ImageNet "
        "5-shot linear accuracy (Fig. 9)",
        notebook="11_class_token_and_norm",
    ),
    "c2": dict(
        claim="GAP at the [class] token's learning rate does worse than at its own",
        paper="App. D.3, Fig. 9 (GAP needs a different learning rate)",
        scale="ViT-B/16 pre-trained for up to 7 epochs, GAP at 8e-4 (the [class] token's rate) against 3e-4 (Fig. 9)",
        notebook="11_class_token_and_norm",
    ),
    "d1": dict(
        claim="the mean attention distance grows with depth",
        paper="§4.5, Fig. 7 (right), App. D.7",
        scale="ViT-L/16 pre-trained on JFT-300M: 24 layers of 16 heads on 224-px images (Fig. 7 right, App. D.7)",
        notebook="14_inspecting_vit",
    ),
    "d2": dict(
        claim="some heads attend globally already in the lowest layer, while others are local (tested as: layer 1's "
        "most local head attends within half the uniform distance, its most global head beyond three quarters of it)",
        paper="§4.5, Fig. 7 (right)",
        scale="ViT-L/16 pre-trained on JFT-300M: 24 layers of 16 heads on 224-px images (Fig. 7 right)",
        notebook="14_inspecting_vit",
    ),
    "e1": dict(
        claim="learned position embeddings encode distance: closer patches have more similar embeddings",
        paper="§4.5, Fig. 7 (center), App. D.4 Fig. 10",
        scale=_FIG7_CENTRE,
        notebook="14_inspecting_vit",
    ),
    "e2": dict(
        claim="learned position embeddings show a row-column structure",
        paper="§4.5, Fig. 7 (center)",
        scale=_FIG7_CENTRE,
        notebook="14_inspecting_vit",
    ),
    "f1": dict(
        claim="fine-tuning at a higher resolution than pre-training (E_pos interpolated in 2D) helps",
        paper="§3.2, App. B.1.1 (pre-trained at 224, fine-tuned at a higher resolution)",
        scale="models pre-trained on 1.3M to 300M images at 224 px with random-resized crops, fine-tuned at 384 px "
        "for 500 to 20,000 steps (App. B.1.1, Table 4)",
        notebook="12_finetune_resolution",
    ),
    "g1": dict(
        claim="hybrids beat the pure ViT at small compute",
        paper="§4.4, Fig. 5",
        scale=_FIG5_HYBRIDS,
        notebook="13_hybrid",
    ),
    "g2": dict(
        claim="the hybrid's advantage shrinks as compute grows",
        paper="§4.4, Fig. 5",
        scale=_FIG5_HYBRIDS,
        notebook="13_hybrid",
    ),
    "g3": dict(
        claim="the highly local attention of the pure ViT's lowest layer is less pronounced in the hybrid (tested as: "
        "layer 1's most local head over the uniform-attention distance, hybrid minus ViT)",
        paper="§4.5, Fig. 7 (right), App. D.7",
        scale="ViT-L/16 and its hybrid pre-trained on JFT-300M (App. D.7)",
        notebook="13_hybrid",
    ),
    "g4": dict(
        claim="at equal training compute ViT beats a ResNet of its size",
        paper="§4.4, Fig. 5 (ViT needs about 2-4x less pre-training compute than ResNets for the same accuracy)",
        scale="ViTs and ResNets of many sizes pre-trained for 7 epochs on JFT-300M, over two orders of magnitude of "
        "compute (Fig. 5)",
        notebook="13_hybrid",
    ),
    "h1": dict(
        claim="masked patch prediction pre-training beats training from scratch",
        paper="§4.6 (ViT-B/16 79.9% on ImageNet, +2% over scratch)",
        scale="ViT-B/16 pre-trained for 1M steps on JFT-300M without labels, fine-tuned on ImageNet (§4.6, App. B.1.2)",
        notebook="15_self_supervision",
    ),
    "h2": dict(
        claim="masked patch prediction trails supervised pre-training",
        paper="§4.6 (4% behind supervised pre-training)",
        scale="ViT-B/16 pre-trained for 1M steps on JFT-300M without labels, against supervised pre-training, "
        "fine-tuned on ImageNet (§4.6)",
        notebook="15_self_supervision",
    ),
    "i1": dict(
        claim="smaller patches (longer sequences) give better accuracy, for more compute",
        paper="§3.1, §4.1, Table 5 (/14 and /16 vs /32), Fig. 8",
        scale="ViT-B/16 against ViT-B/32 pre-trained on ImageNet (77.91% against 73.38%) and on JFT-300M (84.15% "
        "against 80.73%) (Table 5)",
        notebook="10_patch_size_and_shape",
    ),
    "k1": dict(
        claim="scaling depth helps more than scaling width",
        paper="App. D.2, Fig. 8",
        scale="a ViT of 8 layers, D = 1024, D_MLP = 2048, P = 32 scaled one dimension at a time, read by ImageNet "
        "5-shot accuracy (Fig. 8)",
        notebook="10_patch_size_and_shape",
    ),
    "x1": dict(
        claim="with LayerNorm before every block (pre-LN), a deep ViT trains where the original post-LN "
        "Transformer fails without a learning-rate warm-up",
        paper="§3.1 (LN before every block, after Wang et al. 2019 and Baevski & Auli 2019): the paper's "
        "design choice, tested",
        scale="a design choice of every model of the paper, not one of its ablations",
        notebook="11_class_token_and_norm",
    ),
    "m1": dict(
        claim="MAE pre-training beats training from scratch",
        paper="beyond the paper: He et al. 2021 (MAE), the seeds' pointer after §4.6",
        scale="ViT-B to ViT-H pre-trained without labels on ImageNet's 1.28M images (He et al. 2021)",
        notebook="15_self_supervision",
    ),
    "p1": dict(
        claim="pre-training on one task, then fine-tuning on another, beats training the second from scratch",
        paper="§4.1-4.2, Table 2 (transfer after pre-training)",
        scale="ViT-L/16 and ViT-H/14 pre-trained on ImageNet-21k (14M images) or JFT-300M, transferred to ImageNet, "
        "CIFAR, Pets, Flowers and VTAB (Table 2)",
        notebook="16_pretraining",
    ),
    "o1": dict(
        claim="Adam pre-trains ResNets better than SGD with momentum (read by transfer to another task)",
        paper="App. D.1, Table 7 (ResNet-50/152 on JFT: Adam slightly ahead on average)",
        scale="ResNet-50 and ResNet-152 pre-trained on JFT-300M with Adam or SGD, then transferred (Table 7)",
        notebook="16_pretraining",
    ),
    "q1": dict(
        claim="ViT has little image-specific inductive bias: a fixed shuffle of the patches costs a CNN more "
        "accuracy than it costs ViT",
        paper="§3.1 (inductive bias: locality and 2D structure are built into every CNN layer, not into ViT's)",
        scale=_NO_EXPERIMENT,
        notebook="17_inductive_biases",
    ),
    "q2": dict(
        claim="a fixed shuffle of the patches leaves ViT's accuracy unchanged: its position embeddings learn "
        "every spatial relation from scratch",
        paper="§3.1 ('all spatial relations between the patches have to be learned from scratch')",
        scale=_NO_EXPERIMENT,
        notebook="17_inductive_biases",
        demonstration="a fixed permutation of whole patches only renames the rows of E_pos (notebook 17 proves it: the "
        "shuffled model equals the unshuffled one with E_pos's rows permuted), so the arms agree by construction",
    ),
    "t1": dict(
        claim="a dense loss on every patch token (token labelling, targets from a teacher) beats the [class]-only loss",
        paper="beyond the paper: Jiang et al. 2021 ('All Tokens Matter', LV-ViT), the seeds' pointer",
        scale="LV-ViT, 26M to 150M parameters, trained on ImageNet for 300 epochs with an NFNet-F6 annotator (Jiang "
        "et al. 2021)",
        notebook="18_token_labelling",
    ),
    "n1": dict(
        claim="self-distillation without labels (DINO) gives features whose k-NN accuracy beats the raw pixels'",
        paper="beyond the paper: Caron et al. 2021 ('Emerging properties', DINO), k-NN evaluation; the seeds' pointer",
        scale=_DINO,
        notebook="19_dino",
    ),
    "n2": dict(
        claim="DINO's [class] attention falls on the object more than a supervised ViT's",
        paper="beyond the paper: Caron et al. 2021, Fig. 1 and the attention-mask comparison with supervised ViT",
        scale=_DINO,
        notebook="19_dino",
    ),
}
