// nabla's nn: modules, layers (recurrent, attention and Transformers included), losses, functional twins, init,
// gradient clipping, a module's weights in safetensors and PyTorch files (nn/serialize.h) and
// checkpoint_sequential. The tensor file formats are in io/, the metrics in metrics/.
#pragma once

#include "activation.h"
#include "attention.h"
#include "checkpoint.h"
#include "clip_grad.h"
#include "container.h"
#include "conv.h"
#include "distance.h"
#include "dropout.h"
#include "embedding.h"
#include "functional.h"
#include "generation.h"
#include "gpt2.h"
#include "init.h"
#include "linear.h"
#include "loss.h"
#include "module.h"
#include "normalization.h"
#include "pooling.h"
#include "rnn.h"
#include "rnn_utils.h"
#include "serialize.h"
#include "spatial.h"
#include "transformer.h"
#include "upsample.h"
