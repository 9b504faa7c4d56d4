"""A variational autoencoder on the 8x8 handwritten digits that ship with pylucid.

The encoder gives a diagonal Normal posterior q(z | x) over a small latent space, the decoder Bernoulli
logits for the pixels (the images are grey levels in [0, 1], used as soft targets). Training maximises the
evidence lower bound

    ELBO = E_q[log p(x | z)] - KL(q(z | x) || p(z)),   p(z) = Normal(0, 1),

with one reparameterised sample per image (``rsample``: gradients flow through the draw to the encoder) and
the KL term in closed form (``kl_divergence``). At the end it prints the test ELBO and a few images decoded from
prior samples, as text.

    python examples/vae.py            # about -24 nats per image on the test set after 40 epochs (a minute)
    python examples/vae.py --tiny     # a smoke test: a slice of the data, two epochs
"""

import argparse
import os

import pylucid as pl
from pylucid import nn, optim
from pylucid.distributions import Bernoulli, Independent, Normal, kl_divergence
from pylucid.utils.data import DataLoader, TensorDataset

LATENT = 4


class VAE(nn.Module):
    def __init__(self, latent: int = LATENT, hidden: int = 128) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Flatten(), nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 2 * latent))
        self.decoder = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(), nn.Linear(hidden, 64))

    def posterior(self, x):
        """q(z | x): a Normal per latent coordinate, treated as one event of ``latent`` dimensions."""
        loc, log_scale = self.encoder(x).chunk(2, dim=-1)
        return Independent(Normal(loc, log_scale.exp()), 1)

    def likelihood(self, z):
        """p(x | z): independent Bernoulli pixels (64 of them form one event). The grey levels are soft
        targets, outside Bernoulli's support {0, 1}: its value check is off."""
        return Independent(Bernoulli(logits=self.decoder(z), validate_args=False), 1)

    def elbo(self, x, prior, generator=None):
        q = self.posterior(x)
        z = q.rsample(generator=generator)  # reparameterised: z = loc + scale * eps
        log_px = self.likelihood(z).log_prob(x.flatten(1))
        return log_px - kl_divergence(q, prior)  # one value per image


def main() -> None:
    parser = argparse.ArgumentParser(description="Train a VAE on the bundled digits.")
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--tiny", action="store_true", default=os.environ.get("PYLUCID_EXAMPLES_TINY") == "1",
                        help="a few seconds' smoke test (also: PYLUCID_EXAMPLES_TINY=1)")
    args = parser.parse_args()
    pl.manual_seed(0)  # weights, shuffling and the latent draws are reproducible
    g = pl.Generator().manual_seed(1)

    train_x, _ = pl.datasets.load_digits("train")  # (N, 1, 8, 8) float32 in [0, 1]
    test_x, _ = pl.datasets.load_digits("test")
    epochs = args.epochs
    if args.tiny:
        train_x, epochs = train_x[:256], 2

    model = VAE()
    prior = Independent(Normal(pl.zeros(LATENT), pl.ones(LATENT)), 1)
    opt = optim.Adam(model.parameters(), lr=2e-3)
    loader = DataLoader(TensorDataset(train_x), batch_size=64, shuffle=True)

    for epoch in range(1, epochs + 1):
        model.train()
        total = 0.0
        for (images,) in loader:
            loss = -model.elbo(images, prior, g).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(images)
        model.eval()
        with pl.no_grad():
            test_elbo = model.elbo(test_x, prior, g).mean().item()
        print(f"epoch {epoch:2d}  train -ELBO {total / len(train_x):.2f}  test ELBO {test_elbo:.2f} nats/image")

    with pl.no_grad():
        z = prior.sample((3,), generator=g)
        images = pl.sigmoid(model.decoder(z)).reshape(3, 8, 8)
    print("decoded from prior samples:")
    shades = " .:-=+*#"
    for row in range(8):
        print("   ".join("".join(shades[min(int(v * len(shades)), len(shades) - 1)] for v in img[row].tolist())
                         for img in images))


if __name__ == "__main__":
    main()
