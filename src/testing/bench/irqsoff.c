// SPDX-License-Identifier: GPL-2.0
/*
 * The irqsoff tracer's maximum, for `make bench` (test flavour only): the
 * longest stretch with interrupts off on any CPU since the last reset, as
 * tracefs's tracing_max_latency shows it (in µs), whichever code held them
 * off. The same figure for every implementation measured.
 *
 * tracefs files have neither read_iter nor write_iter, which kernel_read()
 * and kernel_write() require, so a shell of tests/vm/bench.sh reads and
 * resets the value for the driver: it waits on a FIFO (IRQSOFF_ASK) for a
 * request, the figure's label, and answers on another (IRQSOFF_ANSWER) with
 * the value it read before the reset. It uses only shell builtins between
 * the reset and its next answer, so no process is created or ends inside a
 * measured window: a process's creation and exit hold interrupts off for
 * milliseconds under emulation, which starting one helper process per
 * reading charged to every window. The FIFOs exist only while the tracer is
 * on (the interrupts-off pass); without them a reading fails (-1).
 */

#include <linux/delay.h>
#include <linux/err.h>
#include <linux/fcntl.h>
#include <linux/fs.h>
#include <linux/jiffies.h>
#include <linux/kstrtox.h>
#include <linux/limits.h>
#include <linux/string.h>

#include "impl.h"

#define IRQSOFF_ASK "/.bench-irqsoff-ask"
#define IRQSOFF_ANSWER "/.bench-irqsoff-answer"
/* How long the reader may take to answer before the reading fails. */
#define IRQSOFF_WAIT_MS 10000

/*
 * Sends @label (or "-" for a reset only) to the reader. The FIFO refuses a
 * writer while the reader is between two requests (-ENXIO): retried until
 * the deadline. Returns 0 or a negative error.
 */
static int irqsoff_ask(const char *label, unsigned long deadline)
{
	char line[80];
	struct file *f;
	loff_t pos = 0;
	ssize_t len;
	int n;

	n = snprintf(line, sizeof(line), "%s\n", label ? label : "-");
	if (n >= sizeof(line))
		return -EINVAL;
	for (;;) {
		f = filp_open(IRQSOFF_ASK, O_WRONLY | O_NONBLOCK, 0);
		if (!IS_ERR(f))
			break;
		if (PTR_ERR(f) != -ENXIO || time_after(jiffies, deadline))
			return PTR_ERR(f);
		usleep_range(1000, 2000);
	}
	len = kernel_write(f, line, n, &pos);
	filp_close(f, NULL);
	return len == n ? 0 : -EIO;
}

/*
 * Reads the reader's answer, one line, into @buf (@size bytes with its NUL):
 * polls until the reader wrote a whole line or the deadline passed. Returns
 * 0 or a negative error.
 */
static int irqsoff_answer(char *buf, size_t size, unsigned long deadline)
{
	size_t got = 0;
	struct file *f;
	ssize_t len;
	int ret = -ETIMEDOUT;

	f = filp_open(IRQSOFF_ANSWER, O_RDONLY | O_NONBLOCK, 0);
	if (IS_ERR(f))
		return PTR_ERR(f);
	while (!time_after(jiffies, deadline)) {
		loff_t pos = 0;

		len = kernel_read(f, buf + got, size - 1 - got, &pos);
		if (len > 0)
			got += len;
		buf[got] = '\0';
		if (strchr(buf, '\n')) {
			ret = 0;
			break;
		}
		if (got == size - 1) {
			ret = -E2BIG;
			break;
		}
		/* No writer yet (0) or no data yet (-EAGAIN). */
		if (len < 0 && len != -EAGAIN) {
			ret = len;
			break;
		}
		usleep_range(1000, 2000);
	}
	filp_close(f, NULL);
	return ret;
}

s64 bench_irqsoff_take(const char *label)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(IRQSOFF_WAIT_MS);
	char buf[24];
	u64 us;

	if (irqsoff_ask(label, deadline) || irqsoff_answer(buf, sizeof(buf), deadline))
		return -1;
	if (kstrtou64(strim(buf), 10, &us) || us > S64_MAX / 1000)
		return -1;
	return us * 1000;
}
