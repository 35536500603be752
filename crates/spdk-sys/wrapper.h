/* What hwceiling's native SPDK engine uses: the environment (DPDK), DMA memory and the NVMe
 * driver's controller, namespace and queue-pair calls. */
#include <spdk/stdinc.h>
#include <spdk/env.h>
#include <spdk/nvme.h>
