// Graceful stop on SIGINT / SIGTERM: the first signal only sets a flag (the trainer finishes the current
// step, every rank agrees to stop, a checkpoint is written, exit 0); a second signal exits at once with
// status 128+signal.
#pragma once

namespace gpt {

void install_stop_handlers();
// Number of stop signals received so far by this process.
int stop_signals_received();

}  // namespace gpt
