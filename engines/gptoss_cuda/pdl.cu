/* pdl.cu — the process-wide programmatic-dependent-launch switch (see pdl.h). */
#include "engines/gptoss_cuda/kernels.h"
#include "engines/gptoss_cuda/pdl.h"

static int g_pdl = 0;

void gptoss_use_pdl(int on) { g_pdl = on != 0; }

int gptoss_pdl_enabled(void) { return g_pdl; }
