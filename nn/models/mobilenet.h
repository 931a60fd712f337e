// Moved to vision/mobilenet.h. This forwarding header keeps the old include path of nabla 0.1 working for
// one release only: include vision/mobilenet.h instead (the README's "Folders" section lists the moves).
#pragma once

#include "../../vision/mobilenet.h"  // nabla: forwarding header
