#include "hdf5_guard.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <limits>
#include <thread>
#include <utility>

#include "halo/core/error.hpp"
#include "halo/core/memory_limits.hpp"
#include "hdf5_handle.hpp"

// Under ASan (clang or gcc) the child clears the death callback: see quiet_crashes.
#if defined(__SANITIZE_ADDRESS__)
#define HALO_GUARD_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HALO_GUARD_ASAN 1
#endif
#endif
#if defined(HALO_GUARD_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif

namespace halo::store {

namespace {

using Clock = std::chrono::steady_clock;

// The child's answer: one status byte, the payload's length (8 bytes, native order: the same
// program reads it) and the payload, the string's bytes or HDF5's error message.
constexpr char answer_ok = 'v';
constexpr char answer_failed = 'e';
constexpr std::size_t header_bytes = 1 + sizeof(std::uint64_t);

/// Owns a file descriptor.
class Fd {
public:
    explicit Fd(int fd = -1) noexcept : fd_(fd) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() { reset(); }
    int get() const noexcept { return fd_; }
    void reset() noexcept
    {
        // Not retried on EINTR: Linux frees the descriptor whatever close returns.
        if (fd_ >= 0) {
            ::close(fd_);
        }
        fd_ = -1;
    }

private:
    int fd_;
};

/// Owns a forked child until it is reaped; one still unreaped when the owner unwinds is killed
/// and reaped first, so that no child outlives the read and no zombie is left.
class Child {
public:
    explicit Child(pid_t pid) noexcept : pid_(pid) {}
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;
    ~Child()
    {
        if (pid_ > 0) {
            kill_and_reap();
        }
    }

    /// Waits for the child until `deadline`; true with its wait status when it ended by then.
    bool wait_until(Clock::time_point deadline, int& status)
    {
        auto pause = std::chrono::microseconds(100);
        for (;;) {
            const pid_t r = ::waitpid(pid_, &status, WNOHANG);
            if (r == pid_ || (r < 0 && errno == ECHILD)) {
                // ECHILD: reaped by someone else (SIGCHLD ignored); its status is unknown.
                if (r < 0) {
                    status = 0;
                }
                pid_ = -1;
                return true;
            }
            if (r < 0 && errno != EINTR) {
                return false;
            }
            if (Clock::now() >= deadline) {
                return false;
            }
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, std::chrono::microseconds(20'000));
        }
    }

    /// SIGKILL, then a blocking wait: a killed process ends at once.
    void kill_and_reap() noexcept
    {
        ::kill(pid_, SIGKILL);
        int status = 0;
        while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
        }
        pid_ = -1;
    }

private:
    pid_t pid_;
};

bool write_all(int fd, const void* data, std::size_t bytes) noexcept
{
    const auto* p = static_cast<const char*>(data);
    while (bytes > 0) {
        const ssize_t n = ::write(fd, p, bytes);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return false;
        }
        p += n;
        bytes -= static_cast<std::size_t>(n);
    }
    return true;
}

/// A crash of HDF5 in the child is the child's alone, an outcome its parent reports: the child
/// dies by the signal itself, not through a handler it inherited (a crash reporter of the
/// application, a sanitizer's or a fuzzer's, which would report the parent's input as a crash of
/// the whole process: scripts/fuzz.sh's fuzz_model did, on corrupt global heaps). A sanitizer's
/// report that is not a signal (a bad memcpy caught before it faults) still ends the child with
/// the sanitizer's exit code; only the death callback a fuzzer set is cleared.
void quiet_crashes() noexcept
{
    struct sigaction by_default {};
    by_default.sa_handler = SIG_DFL;
    sigemptyset(&by_default.sa_mask);
    for (const int signal : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) {
        ::sigaction(signal, &by_default, nullptr);
    }
#if defined(HALO_GUARD_ASAN)
    __sanitizer_set_death_callback(nullptr);
#endif
}

/// The child's whole life. It is a copy of a process that may run other threads (OpenMP workers,
/// AtomicH5File's write-back, Open MPI's progress thread), of which only this one exists here: a
/// lock one of them held stays held. So the child touches HDF5 (the serial build takes no locks),
/// the heap (glibc makes malloc safe after fork) and the pipe, and ends with _exit: no atexit
/// handlers, no second flush of the parent's stdio buffers, no destructors of the parent's
/// objects. Anything else that throws here ends in std::terminate, which the parent reports as a
/// crash.
[[noreturn]] void run_child(hid_t attr, hid_t type, const std::string& where, int out, pid_t parent,
                            std::chrono::milliseconds timeout) noexcept
{
    // A hang must not outlive the reader: the child dies with its parent (killed, say, by a
    // test's own deadline before it could kill the child) and on its own alarm a second after
    // the parent's deadline.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) {
        ::_exit(1);
    }
    quiet_crashes();
    ::signal(SIGALRM, SIG_DFL);
    sigset_t alarm_only;
    sigemptyset(&alarm_only);
    sigaddset(&alarm_only, SIGALRM);
    ::pthread_sigmask(SIG_UNBLOCK, &alarm_only, nullptr);
    ::alarm(static_cast<unsigned>(std::chrono::ceil<std::chrono::seconds>(timeout).count() + 1));

    char* text = nullptr;
    char status = answer_ok;
    std::string message;
    const char* payload = nullptr;
    std::uint64_t length = 0;
    if (H5Aread(attr, type, static_cast<void*>(&text)) < 0) {
        status = answer_failed;
        message = detail::hdf5_error_message("H5Aread", where);
        payload = message.data();
        length = message.size();
    } else if (text != nullptr) {
        payload = text;
        length = std::strlen(text);
    }
    char header[header_bytes];
    header[0] = status;
    std::memcpy(header + 1, &length, sizeof length);
    const bool sent = write_all(out, header, sizeof header) && write_all(out, payload, length);
    ::_exit(sent ? 0 : 1);
}

std::string seconds(std::chrono::milliseconds t)
{
    return halo::detail::concat(static_cast<double>(t.count()) / 1000.0, " s");
}

}  // namespace

std::string read_variable_string_guarded(hid_t attr, hid_t type, const std::string& where,
                                         std::chrono::milliseconds timeout)
{
    const auto deadline = Clock::now() + timeout;
    int ends[2] = {-1, -1};
    if (::pipe2(ends, O_CLOEXEC) != 0) {
        HALO_THROW(IoError, where,
                   ": cannot create a pipe for the guarded read: ", std::strerror(errno));
    }
    Fd in(ends[0]);
    Fd out(ends[1]);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
        HALO_THROW(IoError, where, ": cannot fork for the guarded read: ", std::strerror(errno));
    }
    if (pid == 0) {
        run_child(attr, type, where, out.get(), parent, timeout);
    }
    Child child(pid);
    out.reset();  // so that the child's exit is the end of the pipe

    // The answer, until it is complete (not until end of file: a process that forks meanwhile
    // holds a copy of the write end), the pipe's end or the deadline.
    std::string answer;
    std::uint64_t length = 0;
    bool complete = false;
    bool timed_out = false;
    char buffer[64 * 1024];
    while (!complete) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) {
            timed_out = true;
            break;
        }
        pollfd ready{in.get(), POLLIN, 0};
        const int r = ::poll(&ready, 1,
                             static_cast<int>(std::min<std::int64_t>(
                                 left.count(), std::numeric_limits<int>::max())));
        if (r < 0 && errno != EINTR) {
            HALO_THROW(IoError, where,
                       ": poll on the guarded read's pipe failed: ", std::strerror(errno));
        }
        if (r <= 0) {
            continue;
        }
        const ssize_t n = ::read(in.get(), buffer, sizeof buffer);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
            continue;
        }
        if (n < 0) {
            HALO_THROW(IoError, where,
                       ": read from the guarded read's pipe failed: ", std::strerror(errno));
        }
        if (n == 0) {
            break;  // the child ended, or died, before its answer was complete
        }
        const bool had_header = answer.size() >= header_bytes;
        answer.append(buffer, static_cast<std::size_t>(n));
        if (!had_header && answer.size() >= header_bytes) {
            std::memcpy(&length, answer.data() + 1, sizeof length);
            check_allocation(where, "variable-length string", static_cast<double>(length));
        }
        complete = answer.size() >= header_bytes && answer.size() - header_bytes >= length;
    }

    // A child that answered in time is exiting: it gets a second more to do so.
    const auto reap_by =
        complete ? std::max(deadline, Clock::now() + std::chrono::seconds(1)) : deadline;
    int status = 0;
    if (timed_out || !child.wait_until(reap_by, status)) {
        child.kill_and_reap();
        HALO_THROW(InputError, where, ": HDF5 did not finish in ", seconds(timeout),
                   " reading the variable-length string (in a child process, killed): the file is "
                   "corrupt");
    }
    if (WIFSIGNALED(status)) {
        HALO_THROW(InputError, where, ": HDF5 crashed (signal ", WTERMSIG(status),
                   ") reading the variable-length string (in a child process): the file is "
                   "corrupt");
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        // Where a sanitizer catches the crash, the child exits with its exit code instead.
        HALO_THROW(InputError, where, ": HDF5 failed (the child process exited with status ",
                   WEXITSTATUS(status),
                   ") reading the variable-length string: the file is corrupt");
    }
    const char kind = answer.empty() ? '\0' : answer[0];
    if (!complete || answer.size() != header_bytes + length ||
        (kind != answer_ok && kind != answer_failed)) {
        HALO_THROW(InputError, where, ": garbled answer (", answer.size(),
                   " bytes) from the child process reading the variable-length string");
    }
    answer.erase(0, header_bytes);
    if (kind == answer_failed) {
        throw Hdf5Error(answer, __FILE__, __LINE__);
    }
    return answer;
}

}  // namespace halo::store
