import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim

SOS_token, EOS_token = 0, 1
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size)

    def forward(self, input, hidden):
        embedded = self.embedding(input).view(1, 1, -1)
        output, hidden = self.gru(embedded, hidden)
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, 1, self.hidden_size, device=self.embedding.weight.device)


class DecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size):
        super().__init__()
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size)
        self.out = nn.Linear(hidden_size, output_size)

    def forward(self, input, hidden):
        output = F.relu(self.embedding(input).view(1, 1, -1))
        output, hidden = self.gru(output, hidden)
        return F.log_softmax(self.out(output[0]), dim=1), hidden


def train(input_tensor, target_tensor, encoder, decoder, enc_opt, dec_opt, criterion, teacher_forcing_ratio=0.5):
    encoder_hidden = encoder.initHidden()
    enc_opt.zero_grad()
    dec_opt.zero_grad()
    loss = 0
    for ei in range(input_tensor.size(0)):
        _, encoder_hidden = encoder(input_tensor[ei], encoder_hidden)

    decoder_input = torch.tensor([[SOS_token]], device=device)
    decoder_hidden = encoder_hidden
    use_teacher_forcing = random.random() < teacher_forcing_ratio
    for di in range(target_tensor.size(0)):
        decoder_output, decoder_hidden = decoder(decoder_input, decoder_hidden)
        loss += criterion(decoder_output, target_tensor[di])
        if use_teacher_forcing:
            decoder_input = target_tensor[di]
        else:
            topv, topi = decoder_output.topk(1)
            decoder_input = topi.squeeze().detach()
            if decoder_input.item() == EOS_token:
                break
    loss.backward()
    enc_opt.step()
    dec_opt.step()
    return loss.item() / target_tensor.size(0)


def tensor_from_ids(ids):
    return torch.tensor(ids + [EOS_token], dtype=torch.long, device=device).view(-1, 1)


if __name__ == "__main__":
    hidden_size = 256
    encoder = EncoderRNN(4000, hidden_size).to(device)
    decoder = DecoderRNN(hidden_size, 3000).to(device)
    enc_opt = optim.SGD(encoder.parameters(), lr=0.01)
    dec_opt = optim.SGD(decoder.parameters(), lr=0.01)
    criterion = nn.NLLLoss()
    pairs = [([random.randint(2, 3999) for _ in range(random.randint(3, 8))],
              [random.randint(2, 2999) for _ in range(random.randint(3, 8))]) for _ in range(1000)]
    for it in range(1, 75001):
        src, tgt = random.choice(pairs)
        loss = train(tensor_from_ids(src), tensor_from_ids(tgt), encoder, decoder, enc_opt, dec_opt, criterion)
        if it % 1000 == 0:
            print(it, loss)
