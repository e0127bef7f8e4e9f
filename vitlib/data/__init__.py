"""Data: sources by name (the bundled Fashion-MNIST subset offline, torchvision's sets, folders of images, procedural
tasks), splits and stratified subsets, loaders and augmentation."""

from .augment import AUGMENTATIONS, batch_seed, check_augment, make_mixer, random_crop_flip, random_resized_crop_flip
from .files import FASHION_MNIST_CLASSES, DataError, bundled_dir, data_dir, load_fashion_mnist_mini, verify_checksums
from .loader import FolderLoader, TensorLoader
from .sources import IMAGENET_MEAN, IMAGENET_STD, dataset_names, get_dataset
from .splits import (
    Dataset,
    TensorSplit,
    check_finite_images,
    check_in_memory,
    check_labels,
    resize_dataset,
    stratified_indices,
    subset,
    with_train,
    with_val,
)
from .synthetic import synthetic_position, synthetic_relation
