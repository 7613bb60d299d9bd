// SPDX-License-Identifier: GPL-2.0
/*
 * The irqsoff tracer's maximum, for `make bench` (test flavour only): the
 * longest stretch with interrupts off on any CPU since the last reset, as
 * tracefs's tracing_max_latency shows it (in µs), whichever code held them
 * off. The same figure for every implementation measured.
 *
 * tracefs files have neither read_iter nor write_iter, which kernel_read()
 * and kernel_write() require, so a usermode helper runs the script that
 * tests/vm/bench.sh writes (IRQSOFF_SCRIPT): it copies the value to a file of
 * the root file system (IRQSOFF_COPY) and resets it, and the driver reads that
 * file. It fails (the figure is then -1) unless the irqsoff tracer is the
 * current one. Each call starts a process: only between the timed parts of a
 * round.
 */

#include <linux/err.h>
#include <linux/fs.h>
#include <linux/kstrtox.h>
#include <linux/limits.h>
#include <linux/string.h>
#include <linux/umh.h>

#include "impl.h"

#define IRQSOFF_SCRIPT "/bench-irqsoff.sh"
#define IRQSOFF_COPY "/.bench-irqsoff"

s64 bench_irqsoff_take(void)
{
	char *argv[3], *envp[2];
	char buf[24] = {};
	struct file *f;
	loff_t pos = 0;
	ssize_t len;
	u64 us;

	argv[0] = "/bin/sh";
	argv[1] = IRQSOFF_SCRIPT;
	argv[2] = NULL;
	envp[0] = "PATH=/bin:/sbin:/usr/bin:/usr/sbin";
	envp[1] = NULL;
	if (call_usermodehelper(argv[0], argv, envp, UMH_WAIT_PROC))
		return -1;
	f = filp_open(IRQSOFF_COPY, O_RDONLY, 0);
	if (IS_ERR(f))
		return -1;
	len = kernel_read(f, buf, sizeof(buf) - 1, &pos);
	filp_close(f, NULL);
	if (len <= 0 || kstrtou64(strim(buf), 10, &us) || us > S64_MAX / 1000)
		return -1;
	return us * 1000;
}
