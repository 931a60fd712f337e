// nabla's optim: optimizers, learning-rate schedulers and training checkpoints.
#pragma once

#include "optim/adadelta.h"
#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/adam_variants.h"
#include "optim/lbfgs.h"
#include "optim/checkpoint.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"
