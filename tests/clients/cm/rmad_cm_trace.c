// SPDX-License-Identifier: GPL-2.0
/* The connection manager's trace points, as they are (see Kbuild). */
#include "cm_trace.c"
