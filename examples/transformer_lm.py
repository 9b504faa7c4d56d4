"""A small transformer language model: it learns Shakespeare's sonnets one character at a time.

The text is ``examples/data/sonnets.txt``: William Shakespeare's sonnets I to
XIX (1609), public domain (see examples/README.md). The model is a
decoder-only transformer: character and position embeddings, pre-norm
``nn.TransformerEncoderLayer`` blocks with a causal mask (each position sees
only the characters before it), and a linear head giving the logits of the
next character. It trains with AdamW and a cosine learning-rate schedule,
reports the validation loss in bits per character on the last two sonnets,
then writes new "Shakespeare" from a prompt by sampling one character at a
time.

    python examples/transformer_lm.py           # about five minutes on two CPU cores; --device cuda on a GPU
    python examples/transformer_lm.py --tiny
"""

import argparse
import math
import os

import pylucid as pl
from pylucid import nn, optim

TEXT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "sonnets.txt")


class CharTransformer(nn.Module):
    def __init__(self, vocab: int, context: int, d_model: int, heads: int, layers: int, dropout: float) -> None:
        super().__init__()
        self.context = context
        self.embed = nn.Embedding(vocab, d_model)
        self.position = nn.Embedding(context, d_model)
        block = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=4 * d_model, dropout=dropout,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(block, layers)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)
        # -inf above the diagonal: position t attends to positions <= t only
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(context), persistent=False)

    def forward(self, tokens):                        # (batch, time) int64 -> (batch, time, vocab) logits
        t = tokens.shape[1]
        x = self.embed(tokens) + self.position(pl.arange(t, device=tokens.device))
        x = self.blocks(x, mask=self.causal[:t, :t], is_causal=True)
        return self.head(self.norm(x))


def batch(data, size: int, context: int, device):
    """``size`` random windows of the text and, for each position, the character that follows it."""
    starts = pl.randint(0, len(data) - context - 1, (size, 1))
    index = starts + pl.arange(context)               # (size, context) positions, by broadcasting
    return data[index].to(device), data[index + 1].to(device)


@pl.no_grad()
def sample(model, prompt, length: int, temperature: float, encode, decode, device) -> str:
    model.eval()
    tokens = encode(prompt).unsqueeze(0).to(device)
    for _ in range(length):
        logits = model(tokens[:, -model.context:])[:, -1] / temperature
        following = pl.multinomial(pl.softmax(logits, dim=-1), 1)    # draw the next character
        tokens = pl.cat([tokens, following], dim=1)
    model.train()
    return decode(tokens[0])


def main() -> None:
    parser = argparse.ArgumentParser(description="Train a character-level transformer on the sonnets.")
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--tiny", action="store_true", default=os.environ.get("PYLUCID_EXAMPLES_TINY") == "1",
                        help="a few seconds' smoke test (also: PYLUCID_EXAMPLES_TINY=1)")
    args = parser.parse_args()
    pl.manual_seed(0)

    text = open(TEXT, encoding="utf-8").read()
    chars = sorted(set(text))
    code = {c: i for i, c in enumerate(chars)}

    def encode(s: str):
        return pl.tensor([code[c] for c in s], dtype=pl.int64)

    def decode(tokens) -> str:
        return "".join(chars[i] for i in tokens.tolist())

    data = encode(text)
    split = text.index("XVIII")                       # the last two sonnets are the validation text
    train_data, val_data = data[:split], data[split:]

    if args.tiny:
        steps, context, d_model, heads, layers, batch_size, sample_length = 30, 32, 32, 2, 1, 16, 60
    else:
        steps, context, d_model, heads, layers, batch_size, sample_length = args.steps, 64, 64, 4, 2, 32, 400
    # 12,000 characters are little: a small model, dropout and weight decay keep it from learning them by heart
    model = CharTransformer(len(chars), context, d_model, heads, layers, dropout=0.2).to(args.device)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{len(text)} characters, {len(chars)} distinct; a {layers}-layer transformer with {n_params:,} parameters")
    opt = optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    to_bits = 1 / math.log(2)                         # cross-entropy is in nats; bits per character read better

    for step in range(1, steps + 1):
        x, y = batch(train_data, batch_size, context, args.device)
        logits = model(x)
        loss = nn.functional.cross_entropy(logits.reshape(-1, len(chars)), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)   # transformers like their steps bounded
        opt.step()
        sched.step()
        if step % max(steps // 10, 1) == 0 or step == steps:
            model.eval()
            with pl.no_grad():
                vx, vy = batch(val_data, 64, context, args.device)
                val = nn.functional.cross_entropy(model(vx).reshape(-1, len(chars)), vy.reshape(-1))
            model.train()
            print(f"step {step:5d}  train {loss.item() * to_bits:.3f} bits/char  "
                  f"validation {val.item() * to_bits:.3f} bits/char")

    print("--- sampled from the prompt 'Shall I' ---")
    print(sample(model, "Shall I", sample_length, 0.8, encode, decode, args.device))


if __name__ == "__main__":
    main()
