// nabla's data pipeline: datasets, samplers, the DataLoader, transforms and image files.
//   #include <nabla.h>   (or "data/data.h")
//   namespace data = nabla::data;
#pragma once

#include "audio_folder.h"
#include "collate.h"
#include "dataloader.h"
#include "dataset.h"
#include "datasets.h"
#include "idx.h"
#include "image.h"
#include "random.h"
#include "sampler.h"
#include "transforms.h"
