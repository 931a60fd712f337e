// A DCGAN on 8x8 images, in libtorch's idioms (its own DCGAN example's modules and loop, smaller):
// a generator of ConvTranspose2d, BatchNorm2d, ReLU and Tanh, a discriminator of Conv2d,
// LeakyReLU and Sigmoid as TORCH_MODULEs, torch::nn::init on the weights, Adam with betas(0.5,
// 0.999), and binary_cross_entropy on real and generated batches. Weights, noise and the "real"
// images come from fixed formulas, so libtorch 1.13 and nabla's torch layer print the same numbers.
#include <torch/torch.h>

#include <cstdio>
#include <string>

struct GeneratorImpl : torch::nn::Module {
  explicit GeneratorImpl(int64_t noise_size)
      : conv1(torch::nn::ConvTranspose2dOptions(noise_size, 16, 4).bias(false)),
        batch_norm1(16),
        conv2(torch::nn::ConvTranspose2dOptions(16, 1, 4).stride(2).padding(1).bias(false)) {
    register_module("conv1", conv1);
    register_module("batch_norm1", batch_norm1);
    register_module("conv2", conv2);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(batch_norm1(conv1(x)));  // (N, 16, 4, 4)
    return torch::tanh(conv2(x));            // (N, 1, 8, 8)
  }
  torch::nn::ConvTranspose2d conv1;
  torch::nn::BatchNorm2d batch_norm1;
  torch::nn::ConvTranspose2d conv2;
};
TORCH_MODULE(Generator);

struct DiscriminatorImpl : torch::nn::Module {
  DiscriminatorImpl() {
    net = register_module(
        "net",
        torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 8, 4).stride(2).padding(1).bias(false)),
                              torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(0.2)),
                              torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 1, 4).stride(1).padding(0).bias(false)),
                              torch::nn::Sigmoid()));
  }
  torch::Tensor forward(torch::Tensor x) { return net->forward(x).view({-1}); }
  torch::nn::Sequential net{nullptr};
};
TORCH_MODULE(Discriminator);

void init_weights(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.named_parameters()) {
    double seed = 0;
    for (char c : p.key()) seed += static_cast<unsigned char>(c);
    torch::Tensor i = torch::arange(0, p.value().numel(), torch::kFloat32);
    if (p.key().find("batch_norm") != std::string::npos && p.key().find("weight") != std::string::npos)
      p.value().copy_(1.0 + (i * 0.3 + seed).sin().mul(0.02).view_as(p.value()));
    else if (p.key().find("batch_norm") != std::string::npos) torch::nn::init::constant_(p.value(), 0.0);
    else p.value().copy_((i * 0.7131 + seed * 0.01).sin().mul(0.08).view_as(p.value()));
  }
}

torch::Tensor noise(int64_t n, int64_t step) {
  torch::Tensor i = torch::arange(0, n * 8, torch::kFloat32).view({n, 8, 1, 1});
  return (i * 0.913 + static_cast<double>(step) * 0.377).sin();
}
// Bright diagonal stripes whose phase moves with the sample index: values in [-1, 1].
torch::Tensor real_images(int64_t n, int64_t step) {
  torch::Tensor r = torch::arange(0, 8, torch::kFloat32).view({1, 1, 8, 1});
  torch::Tensor c = torch::arange(0, 8, torch::kFloat32).view({1, 1, 1, 8});
  torch::Tensor k = (torch::arange(0, n, torch::kFloat32) + static_cast<double>(step)).view({n, 1, 1, 1});
  return ((r + c) * 0.8 + k * 0.5).sin();
}

int main() {
  const int64_t noise_size = 8, batch_size = 16;
  Generator generator(noise_size);
  Discriminator discriminator;
  init_weights(*generator);
  init_weights(*discriminator);
  torch::optim::Adam generator_optimizer(generator->parameters(),
                                         torch::optim::AdamOptions(2e-3).betas(std::make_tuple(0.5, 0.999)));
  torch::optim::Adam discriminator_optimizer(discriminator->parameters(),
                                             torch::optim::AdamOptions(2e-3).betas(std::make_tuple(0.5, 0.999)));

  for (int64_t step = 1; step <= 40; ++step) {
    discriminator->zero_grad();
    torch::Tensor real = real_images(batch_size, step);
    torch::Tensor real_labels = torch::full({batch_size}, 0.9);
    torch::Tensor d_loss_real = torch::binary_cross_entropy(discriminator->forward(real), real_labels);
    d_loss_real.backward();
    torch::Tensor fake = generator->forward(noise(batch_size, step));
    torch::Tensor fake_labels = torch::zeros({batch_size});
    torch::Tensor d_loss_fake = torch::binary_cross_entropy(discriminator->forward(fake.detach()), fake_labels);
    d_loss_fake.backward();
    torch::Tensor d_loss = d_loss_real + d_loss_fake;
    discriminator_optimizer.step();

    generator->zero_grad();
    fake_labels.fill_(1);
    torch::Tensor g_loss = torch::binary_cross_entropy(discriminator->forward(fake), fake_labels);
    g_loss.backward();
    generator_optimizer.step();
    if (step % 8 == 0)
      std::printf("step %lld d_loss %.6f g_loss %.6f\n", static_cast<long long>(step), d_loss.item<double>(),
                  g_loss.item<double>());
  }
  generator->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor samples = generator->forward(noise(4, 99));
  std::printf("samples shape %lld %lld %lld %lld mean %.6f\n", static_cast<long long>(samples.size(0)),
              static_cast<long long>(samples.size(1)), static_cast<long long>(samples.size(2)),
              static_cast<long long>(samples.size(3)), samples.mean().item<double>());
  std::printf("running_var_sum %.6f\n", generator->batch_norm1->running_var.sum().item<double>());
}
