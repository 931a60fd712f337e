// nabla: one include for the whole framework.
//   #include <nabla.h>
//   using namespace nabla;
#pragma once

#include "autograd/autograd.h"
#include "autograd/checkpoint.h"
#include "autograd/function.h"
#include "core/autocast.h"
#include "core/cuda_api.h"
#include "core/determinism.h"
#include "core/generator.h"
#include "core/graph.h"
#include "core/indexing_ops.h"
#include "core/linalg.h"
#include "core/math_ops.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "data/data.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "io/torch_file.h"
#include "metrics/metrics.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "tensorboard/summary_writer.h"
#include "text/bpe.h"
#include "vision/vision.h"
