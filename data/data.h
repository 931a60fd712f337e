// nabla's data pipeline: datasets, samplers, the DataLoader, transforms and image files.
//   #include <nabla.h>   (or "data/data.h")
//   namespace data = nabla::data;
#pragma once

#include "data/dataloader.h"
#include "data/dataset.h"
#include "data/datasets.h"
#include "data/idx.h"
#include "data/image.h"
#include "data/random.h"
#include "data/sampler.h"
#include "data/transforms.h"
