"""What the notebooks run: the paper's claims as experiments over seeds (`experiments`, `stats`), learning-rate
sweeps, data size, costs (`cost`: FLOPs, parameters, shapes; `timing`: measured speed), fine-tuning at a higher
resolution, self-supervised pre-training and linear probes, inspection (`embeddings`, `attention_maps`,
`reference`), plots and the papermill parameter check (`notebook`)."""
