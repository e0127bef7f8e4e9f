"""The course built on vitlib: the paper's claims as experiments over seeds (`experiments`, `stats`: Welch's t, the
paired t, TOST, Holm), learning-rate sweeps (`sweep`) and their runs side by side (`parallel`), replication records
(`replication`), the claims ledger and its report (`paper_claims`, `claims`, `forest`), the studies of single
notebooks (`datasize`, `inductive_bias`, `dino`, `pretrain`, `reference`, `timing`), and the notebooks' helpers
(`notebook`: the papermill parameter check; `exercises`; `plotting`). It imports vitlib; vitlib never imports it.
"""

import os as _os

# Sweeps run in worker processes forked from this one (course.parallel), and a forked process cannot use CUDA once
# its parent has started the CUDA driver, which torch.cuda.is_available() does unless NVML answers it instead.
_os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
