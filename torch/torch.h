// nabla's torch compatibility layer: libtorch's C++ API (namespace torch) over nabla.
//
//   #include <nabla/torch.h>   // or <torch/torch.h>, which finds this header first on nabla's paths
//
// A libtorch program compiles against nabla with this include and the CMake target
// nabla::torch_compat (or find_package(Torch) with the TorchConfig.cmake the install ships under
// -DNABLA_INSTALL_TORCH_CONFIG=ON). torch/README.md lists what is here and what is not (TorchScript,
// torch::jit, c10 internals, CUDA extension APIs). torch::Tensor is nabla::Tensor and
// torch::nn::Module is nabla::nn::Module: a torch:: handle reaches nabla's own API directly.
#pragma once

// nabla's modules declare forward overloads that hide the base's virtual ones on purpose; clang's
// -Wall reports that (-Woverloaded-virtual) at their definitions, inside this header's includes.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverloaded-virtual"

#include "archive.h"
#include "autograd.h"
#include "data.h"
#include "functions.h"
#include "ivalue.h"
#include "nn.h"
#include "optim.h"
#include "serialize.h"
#include "types.h"

#pragma GCC diagnostic pop
