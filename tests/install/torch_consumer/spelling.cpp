// nabla's own spelling of the torch layer's include, from an install.
#include <nabla/torch.h>

torch::Tensor spelled_as_nabla() { return torch::ones({1}); }
