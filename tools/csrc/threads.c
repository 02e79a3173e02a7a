/* One background thread for a Python object's work (Reader, Stats): started when
 * the object is made, joined (without the GIL) before its results are read. */
#include "common.h"

void background_start(Background *bg, void *(*work)(void *), void *arg) {
    bg->started = pthread_create(&bg->thread, NULL, work, arg) == 0;
    if (!bg->started) { /* no thread to be had: do the work now */
        Py_BEGIN_ALLOW_THREADS
        work(arg);
        Py_END_ALLOW_THREADS
        bg->finished = 1;
    }
}

void background_join(Background *bg) {
    if (bg->started && !bg->finished) {
        Py_BEGIN_ALLOW_THREADS
        pthread_join(bg->thread, NULL);
        Py_END_ALLOW_THREADS
    }
    bg->finished = 1;
}
