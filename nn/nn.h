// nabla's nn: modules, layers, losses, functional twins, init, gradient clipping, metrics and
// safetensors weights.
#pragma once

#include "nn/activation.h"
#include "nn/clip_grad.h"
#include "nn/container.h"
#include "nn/conv.h"
#include "nn/distance.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/functional.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/metrics.h"
#include "nn/module.h"
#include "nn/normalization.h"
#include "nn/ordered_dict.h"
#include "nn/pooling.h"
#include "nn/rnn.h"
#include "nn/safetensors.h"
#include "nn/upsample.h"
