"""strata.utils.data: datasets, samplers and the DataLoader (torch.utils.data)."""

from .dataset import Dataset, IterableDataset, TensorDataset, ConcatDataset, Subset, random_split
from .sampler import Sampler, SequentialSampler, RandomSampler, SubsetRandomSampler, BatchSampler
from ._collate import default_collate, default_convert
from .dataloader import DataLoader
from ._more import (WeightedRandomSampler, DistributedSampler, ChainDataset, StackDataset, get_worker_info,
                    WorkerInfo)

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "Subset", "random_split", "Sampler",
           "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "BatchSampler", "default_collate",
           "default_convert", "DataLoader", "WeightedRandomSampler", "DistributedSampler", "ChainDataset",
           "StackDataset", "get_worker_info", "WorkerInfo"]
