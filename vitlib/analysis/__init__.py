"""What any study of a ViT measures (section 4.5 and the appendices): where attention looks (`attention`: mean
attention distance, rollout), what E and E_pos learned (`embeddings`), what a model costs (`cost`: FLOPs, sequence
lengths), how good its frozen features are (`probe`: linear and k-NN), and a pre-trained model made ready to fine-tune
at another resolution (`finetune`)."""
