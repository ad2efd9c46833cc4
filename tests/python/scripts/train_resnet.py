"""A small ResNet trained the way typical torch scripts do it: arguments, device selection, seeding,
a DataLoader over synthetic images, SGD with momentum and a cosine schedule, formatted logging,
a checkpoint every epoch and resuming from it. Written for PyTorch; run unchanged on Strata."""

import argparse
import json
import os
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, kernel_size=1, stride=stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        return F.relu(out)


class ResNet(nn.Module):
    def __init__(self, num_blocks=(1, 1), num_classes=10, width=8):
        super().__init__()
        self.in_planes = width
        self.conv1 = nn.Conv2d(3, width, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.layer1 = self._make_layer(width, num_blocks[0], stride=1)
        self.layer2 = self._make_layer(width * 2, num_blocks[1], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 2, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, planes, n, stride):
        layers = []
        for s in [stride] + [1] * (n - 1):
            layers.append(BasicBlock(self.in_planes, planes, s))
            self.in_planes = planes
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def make_data(n=64):
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(n, 3, 16, 16, generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    return TensorDataset(x, y)


def train_epoch(model, loader, optimizer, scheduler, device, epoch, log):
    model.train()
    total, correct, running = 0, 0, 0.0
    for i, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad(set_to_none=True)
        out = model(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
        optimizer.step()
        running += loss.item() * x.size(0)
        correct += (out.argmax(1) == y).sum().item()
        total += x.size(0)
        log.append(f"epoch {epoch} batch {i} loss {loss:.4f} lr {scheduler.get_last_lr()[0]:.5f}")
    scheduler.step()
    return running / total, correct / total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--resume-epochs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = True
    set_seed(args.seed)
    loader = DataLoader(make_data(), batch_size=16, shuffle=True)
    model = ResNet().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4, nesterov=True)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs + args.resume_epochs)
    log, losses = [], []
    ckpt = os.path.join(args.out, "ckpt.pt")
    for epoch in range(args.epochs):
        loss, acc = train_epoch(model, loader, optimizer, scheduler, device, epoch, log)
        losses.append(loss)
        torch.save({"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "loss": loss}, ckpt)

    # Resume in a fresh model/optimizer from the checkpoint, as a restarted job would.
    state = torch.load(ckpt, map_location=device)
    model2 = ResNet().to(device)
    model2.load_state_dict(state["model"])
    optimizer2 = torch.optim.SGD(model2.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4, nesterov=True)
    optimizer2.load_state_dict(state["optimizer"])
    scheduler2 = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer2, T_max=args.epochs + args.resume_epochs)
    scheduler2.load_state_dict(state["scheduler"])
    for epoch in range(state["epoch"] + 1, state["epoch"] + 1 + args.resume_epochs):
        loss, acc = train_epoch(model2, loader, optimizer2, scheduler2, device, epoch, log)
        losses.append(loss)
    model2.eval()
    with torch.no_grad():
        probe = model2(make_data(8).tensors[0].to(device))
    print(log[-1])
    with open(os.path.join(args.out, "result.json"), "w") as f:
        json.dump({"losses": losses, "probe": probe.cpu().numpy().tolist(), "log": log}, f)


if __name__ == "__main__":
    main()
