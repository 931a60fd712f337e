// Moved to metrics/metrics.h. This forwarding header keeps the old include path of nabla 0.1 working for
// one release only: include metrics/metrics.h instead (the README's "Folders" section lists the moves).
#pragma once

#include "../metrics/metrics.h"  // nabla: forwarding header
