// SPDX-License-Identifier: GPL-2.0
/*
 * The irqsoff tracer's maximum, for `make bench` (test flavour only): the
 * longest stretch with interrupts off on any CPU since the last reset, as
 * tracefs's tracing_max_latency shows it (in µs), whichever code held them
 * off. The same figure for every implementation measured.
 *
 * tracefs files have neither read_iter nor write_iter, which kernel_read()
 * and kernel_write() require, so a usermode helper (the initramfs's sh)
 * copies the value to a file of the root file system and resets it; the
 * driver reads that file. Each call starts a process: only between the timed
 * parts of a round.
 */

#include <linux/err.h>
#include <linux/fs.h>
#include <linux/kstrtox.h>
#include <linux/limits.h>
#include <linux/string.h>
#include <linux/umh.h>

#include "impl.h"

#define IRQSOFF_COPY "/.bench-irqsoff"

/*
 * Fails (so that the figure is -1) unless the irqsoff tracer is the current
 * one (tests/vm/bench.sh selects it); the copy replaces the last one only once
 * it is whole.
 */
static char irqsoff_script[] =
	"t=/sys/kernel/tracing; "
	"[ \"$(cat $t/current_tracer)\" = irqsoff ] && "
	"cat $t/tracing_max_latency >" IRQSOFF_COPY ".new && "
	"echo 0 >$t/tracing_max_latency && "
	"mv " IRQSOFF_COPY ".new " IRQSOFF_COPY;

s64 bench_irqsoff_take(void)
{
	static char sh[] = "/bin/sh", dash_c[] = "-c";
	static char path[] = "PATH=/bin:/sbin:/usr/bin:/usr/sbin";
	char *argv[] = { sh, dash_c, irqsoff_script, NULL };
	char *envp[] = { path, NULL };
	char buf[24] = {};
	struct file *f;
	loff_t pos = 0;
	ssize_t len;
	u64 us;

	if (call_usermodehelper(sh, argv, envp, UMH_WAIT_PROC))
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
