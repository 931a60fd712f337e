// A small GAN in libtorch's idioms (its DCGAN example's loop, on 1-D data): a generator and a
// discriminator as Sequentials of handles, two Adam optimizers with betas, BCELoss with real and
// fake labels, detach() for the discriminator's step, and torch::nn::init on the weights. The
// "real" data are points on a sine curve; the noise comes from a fixed formula, not from torch's
// random generator, so libtorch 1.13 and nabla's torch layer print the same numbers.
#include <torch/torch.h>

#include <cstdio>
#include <string>

torch::Tensor fixed_values(const std::string& name, torch::IntArrayRef sizes, double scale) {
  double seed = 0;
  for (char c : name) seed += static_cast<unsigned char>(c);
  torch::Tensor idx = torch::arange(0, torch::ones(sizes).numel(), torch::kFloat32);
  return (idx * 0.9173 + seed * 0.031).cos().mul(scale).reshape(sizes);
}

void init_weights(torch::nn::Module& module, double scale) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.named_parameters()) p.value().copy_(fixed_values(p.key(), p.value().sizes(), scale));
}

// Noise (n, 4) for step `step`, and real samples (n, 2): (t, sin(3 t)).
torch::Tensor noise(int64_t n, int64_t step) {
  torch::Tensor i = torch::arange(0, n * 4, torch::kFloat32).view({n, 4});
  return (i * 1.37 + static_cast<double>(step) * 0.61).sin();
}
torch::Tensor real_batch(int64_t n, int64_t step) {
  torch::Tensor t = (torch::arange(0, n, torch::kFloat32) * 0.173 + static_cast<double>(step) * 0.29).sin();
  return torch::stack({t, torch::sin(t * 3)}, /*dim=*/1);
}

int main() {
  torch::nn::Sequential generator(torch::nn::Linear(4, 16),
                                  torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(0.2)),
                                  torch::nn::Linear(16, 16), torch::nn::Tanh(), torch::nn::Linear(16, 2));
  torch::nn::Sequential discriminator(torch::nn::Linear(2, 16),
                                      torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(0.2)),
                                      torch::nn::Linear(16, 1), torch::nn::Sigmoid());
  init_weights(*generator, 0.4);
  init_weights(*discriminator, 0.4);
  {
    torch::NoGradGuard no_grad;
    torch::nn::init::constant_(discriminator[2]->as<torch::nn::LinearImpl>()->bias, 0.05);
  }

  torch::optim::Adam g_opt(generator->parameters(), torch::optim::AdamOptions(2e-3).betas(std::make_tuple(0.5, 0.999)));
  torch::optim::Adam d_opt(discriminator->parameters(),
                           torch::optim::AdamOptions(2e-3).betas(std::make_tuple(0.5, 0.999)));
  torch::nn::BCELoss criterion;

  const int64_t batch = 32;
  for (int64_t step = 1; step <= 60; ++step) {
    // Discriminator: real samples labelled 0.9 (label smoothing), generated ones 0.
    discriminator->zero_grad();
    torch::Tensor real = real_batch(batch, step);
    torch::Tensor real_labels = torch::empty({batch, 1}).fill_(0.9);
    torch::Tensor d_loss_real = criterion(discriminator->forward(real), real_labels);
    d_loss_real.backward();
    torch::Tensor fake = generator->forward(noise(batch, step));
    torch::Tensor fake_labels = torch::zeros({batch, 1});
    torch::Tensor d_loss_fake = criterion(discriminator->forward(fake.detach()), fake_labels);
    d_loss_fake.backward();
    d_opt.step();

    // Generator: make the discriminator say 1 on generated samples.
    generator->zero_grad();
    fake_labels.fill_(1.0);
    torch::Tensor g_loss = torch::binary_cross_entropy(discriminator->forward(fake), fake_labels);
    g_loss.backward();
    g_opt.step();
    if (step % 10 == 0)
      std::printf("step %lld d_loss %.6f g_loss %.6f\n", static_cast<long long>(step),
                  (d_loss_real + d_loss_fake).item<double>(), g_loss.item<double>());
  }
  torch::NoGradGuard no_grad;
  torch::Tensor samples = generator->forward(noise(8, 1000));
  std::printf("samples mean %.6f %.6f\n", samples.mean(0)[0].item<double>(), samples.mean(0)[1].item<double>());
  std::printf("d_on_real %.6f\n", discriminator->forward(real_batch(8, 1000)).mean().item<double>());
}
