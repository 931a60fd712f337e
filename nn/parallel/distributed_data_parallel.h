// Moved to distributed/distributed_data_parallel.h. This forwarding header keeps the old include path of nabla 0.1 working for
// one release only: include distributed/distributed_data_parallel.h instead (the README's "Folders" section lists the moves).
#pragma once

#include "../../distributed/distributed_data_parallel.h"  // nabla: forwarding header
