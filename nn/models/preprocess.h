// Moved to vision/preprocess.h. This forwarding header keeps the old include path of nabla 0.1 working for
// one release only: include vision/preprocess.h instead (the README's "Folders" section lists the moves).
#pragma once

#include "../../vision/preprocess.h"  // nabla: forwarding header
