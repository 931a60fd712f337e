// nabla's model zoo: torchvision's image classification architectures (namespace nabla::vision),
// with torchvision's module trees and state dict names. See nn/models/README.md.
#pragma once

#include "nn/models/classic.h"
#include "nn/models/convnext.h"
#include "nn/models/efficientnet.h"
#include "nn/models/layers.h"
#include "nn/models/mobilenet.h"
#include "nn/models/regnet.h"
#include "nn/models/resnet.h"
#include "nn/models/swin.h"
#include "nn/models/vit.h"
#include "nn/models/weights.h"
