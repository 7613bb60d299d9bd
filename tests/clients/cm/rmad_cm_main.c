// SPDX-License-Identifier: GPL-2.0
/* The kernel's connection manager, as it is (see Kbuild). */
#include "cm.c"
