import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class ConvNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.bn = nn.BatchNorm2d(64)
        self.fc = nn.Linear(64 * 8 * 8, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.bn(self.conv2(x))), 2)
        return self.fc(x.flatten(1))


def build_model(args):
    model = ConvNet(args.num_classes)
    if args.resume:
        model.load_state_dict(torch.load(args.resume, map_location="cpu"))
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    return model.cuda()


class Trainer:
    def __init__(self, model, lr):
        self.model = nn.DataParallel(model).cuda()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9)
        self.criterion = nn.CrossEntropyLoss().cuda()

    def step(self, images, targets):
        images = images.cuda(non_blocking=True)
        targets = targets.cuda(non_blocking=True)
        loss = self.criterion(self.model(images), targets)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-classes", type=int, default=10)
    parser.add_argument("--resume", default="")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--iters", type=int, default=1000)
    args = parser.parse_args()

    trainer = Trainer(build_model(args), args.lr)
    for it in range(args.iters):
        x = torch.randn(256, 3, 32, 32)
        y = torch.randint(0, args.num_classes, (256,))
        loss = trainer.step(x, y)
        if it % 50 == 0:
            print(f"iter {it} loss {loss:.4f}")
