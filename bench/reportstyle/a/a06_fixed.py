import torch
import torch.nn as nn
import torch.optim as optim


class SplitConvNet(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.dev0 = torch.device("cuda:0")
        self.dev1 = torch.device("cuda:1")
        self.stage1 = nn.Sequential(
            nn.Conv2d(3, 64, 7, stride=2, padding=3), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
            nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.BatchNorm2d(128), nn.ReLU(inplace=True),
        ).to(self.dev0)
        self.stage2 = nn.Sequential(
            nn.Conv2d(128, 256, 3, stride=2, padding=1), nn.BatchNorm2d(256), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Linear(256, num_classes),
        ).to(self.dev1)

    def forward(self, x):
        x = self.stage1(x.to(self.dev0))
        return self.stage2(x.to(self.dev1))


def train(model, steps=500, batch_size=64):
    loss_fn = nn.CrossEntropyLoss()
    optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for step in range(steps):
        inputs = torch.randn(batch_size, 3, 224, 224)
        labels = torch.randint(0, 1000, (batch_size,)).to("cuda:1")
        optimizer.zero_grad()
        outputs = model(inputs)
        loss = loss_fn(outputs, labels)
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            print(step, loss.item())


if __name__ == "__main__":
    net = SplitConvNet()
    train(net)
