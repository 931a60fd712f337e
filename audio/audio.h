// nabla::audio: torchaudio's load/save/info, functional and transforms (see README.md).
#pragma once

#include "functional.h"
#include "io.h"
#include "transforms.h"
