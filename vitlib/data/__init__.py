"""Data: sources by name (the bundled Fashion-MNIST subset offline, torchvision's sets, folders of images, procedural
tasks), splits and stratified subsets, loaders and augmentation."""

from .augment import (
    AUGMENTATIONS,
    batch_seed,
    check_augment,
    folder_transforms,
    make_mixer,
    random_crop_flip,
    random_resized_crop_flip,
)
from .files import (
    FASHION_MNIST_CLASSES,
    DataError,
    bundled_dir,
    data_dir,
    load_fashion_mnist_mini,
    read_idx,
    verify_checksums,
)
from .loader import FolderLoader, TensorLoader
from .sources import IMAGENET_MEAN, IMAGENET_STD, STATS, dataset_names, get_dataset
from .splits import (
    Dataset,
    TensorSplit,
    check_finite_images,
    class_subset,
    disjoint_subsets,
    fraction_of,
    labels_of,
    resize_dataset,
    split_off,
    stratified_indices,
    subset,
    with_train,
    with_val,
)
from .synthetic import relation_glyphs, synthetic_position, synthetic_relation
