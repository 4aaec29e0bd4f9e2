// libsystemd's D-Bus client and server (sd-bus) and the service manager's notification
// protocol (sd_notify). Only DBusBridge imports this module.
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
// The dispatch thread's wait: the bus descriptor and an eventfd that wakes it for work.
#include <poll.h>
#include <sys/eventfd.h>
