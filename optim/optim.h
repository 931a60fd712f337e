// nabla's optim: optimizers, learning-rate schedulers, training checkpoints and amp::GradScaler.
#pragma once

#include "adadelta.h"
#include "adagrad.h"
#include "adam.h"
#include "adam_variants.h"
#include "asgd.h"
#include "checkpoint.h"
#include "grad_scaler.h"
#include "lbfgs.h"
#include "lr_scheduler.h"
#include "optimizer.h"
#include "rmsprop.h"
#include "rprop.h"
#include "sgd.h"
