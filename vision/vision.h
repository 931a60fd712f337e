// nabla's model zoo: torchvision's image classification architectures (namespace nabla::vision),
// with torchvision's module trees and state dict names. See nn/models/README.md.
#pragma once

#include "classic.h"
#include "convnext.h"
#include "efficientnet.h"
#include "layers.h"
#include "mobilenet.h"
#include "preprocess.h"
#include "regnet.h"
#include "resnet.h"
#include "swin.h"
#include "vit.h"
#include "weights.h"
