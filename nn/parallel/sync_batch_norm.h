// Moved to distributed/sync_batch_norm.h. This forwarding header keeps the old include path of nabla 0.1 working for
// one release only: include distributed/sync_batch_norm.h instead (the README's "Folders" section lists the moves).
#pragma once

#include "../../distributed/sync_batch_norm.h"  // nabla: forwarding header
