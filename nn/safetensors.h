// Moved to io/safetensors.h and nn/serialize.h. This forwarding header keeps the old include path of nabla 0.1 working for
// one release only: include io/safetensors.h and nn/serialize.h instead (the README's "Folders" section lists the moves).
#pragma once

#include "../io/safetensors.h"  // nabla: forwarding header
#include "serialize.h"          // nabla: forwarding header
