"""A small U-Net for segmentation: ConvTranspose2d and bilinear F.interpolate in the decoder,
MaxPool2d in the encoder, skip connections with torch.cat, Adam, a BCE-with-logits + Dice loss.
Written for PyTorch; run unchanged on Strata."""

import argparse
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F


class DoubleConv(nn.Sequential):
    def __init__(self, cin, cout):
        super().__init__(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.GroupNorm(4, cout), nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.GroupNorm(4, cout), nn.ReLU(inplace=True))


class UNet(nn.Module):
    def __init__(self, cin=1, classes=1, w=8):
        super().__init__()
        self.inc = DoubleConv(cin, w)
        self.down1 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(w, 2 * w))
        self.down2 = nn.Sequential(nn.MaxPool2d(2), DoubleConv(2 * w, 4 * w))
        self.up1 = nn.ConvTranspose2d(4 * w, 2 * w, kernel_size=2, stride=2)
        self.conv1 = DoubleConv(4 * w, 2 * w)
        self.conv2 = DoubleConv(3 * w, w)
        self.outc = nn.Conv2d(w, classes, kernel_size=1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        y = self.up1(x3)
        y = self.conv1(torch.cat([x2, y], dim=1))
        y = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
        y = self.conv2(torch.cat([x1, y], dim=1))
        return self.outc(y)


def dice_loss(logits, target, eps=1.0):
    p = torch.sigmoid(logits)
    num = 2 * (p * target).sum(dim=(1, 2, 3)) + eps
    den = p.sum(dim=(1, 2, 3)) + target.sum(dim=(1, 2, 3)) + eps
    return 1 - (num / den).mean()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = UNet().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.rand(4, 1, 32, 32, device=device)
    target = (F.avg_pool2d(x, 5, stride=1, padding=2) > 0.5).float()
    losses = []
    for step in range(args.steps):
        opt.zero_grad()
        logits = model(x)
        loss = F.binary_cross_entropy_with_logits(logits, target) + dice_loss(logits, target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        print(f"step {step}: loss={loss.item():.4f}")
    torch.save(model.state_dict(), os.path.join(args.out, "unet.pt"))
    with open(os.path.join(args.out, "result.json"), "w") as f:
        json.dump({"losses": losses, "out": model(x[:1]).detach().flatten()[:64].tolist()}, f)


if __name__ == "__main__":
    main()
