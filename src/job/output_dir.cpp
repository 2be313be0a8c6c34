#include "output_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <vector>

#include "halo/core/error.hpp"
#include "halo/core/result.hpp"

namespace halo::job {

namespace {

constexpr const char* kLockName = ".halo-infer.lock";

// What a result leaves in its directory: the manifest, part-<p>.h5 and their temporary files
// (part-<p>.h5.tmp-<pid>, manifest.json.tmp-<pid>).
bool is_result_file(const std::string& name)
{
    const auto starts = [&](const char* prefix) { return name.rfind(prefix, 0) == 0; };
    if (starts("manifest.json")) {
        return true;
    }
    if (!starts("part-")) {
        return false;
    }
    const auto h5 = name.find(".h5");
    if (h5 == std::string::npos || h5 <= 5) {
        return false;
    }
    const auto digits = name.substr(5, h5 - 5);
    return std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
           (h5 + 3 == name.size() || name.compare(h5 + 3, 5, ".tmp-") == 0);
}

// Signal-safe copies of the paths to remove (set before the handler may run).
char signal_lock[4096];
char signal_dir[4096];

void copy_path(char* to, const std::filesystem::path& from)
{
    const auto& s = from.native();
    const auto n = std::min(s.size(), std::size_t{4095});
    std::memcpy(to, s.data(), n);
    to[n] = '\0';
}

}  // namespace

void set_signal_cleanup(const std::filesystem::path& lock, const std::filesystem::path& created_dir)
{
    copy_path(signal_lock, lock);
    copy_path(signal_dir, created_dir);
}

void signal_cleanup() noexcept
{
    if (signal_lock[0] != '\0') {
        static_cast<void>(::unlink(signal_lock));
    }
    if (signal_dir[0] != '\0') {
        static_cast<void>(::rmdir(signal_dir));  // fails unless empty: pieces stay
    }
}

OutputDir::OutputDir(const std::filesystem::path& dir, bool overwrite)
    : dir_(dir), lock_path_(dir / kLockName)
{
    std::error_code ec;
    if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec)) {
        HALO_THROW(InputError, "--out ", dir.string(), ": exists and is not a directory");
    }
    if (!std::filesystem::exists(dir, ec)) {
        std::filesystem::create_directories(dir, ec);
        if (ec) {
            HALO_THROW(IoError, "--out ", dir.string(),
                       ": cannot create the directory: ", ec.message());
        }
        created_ = true;
    }
    // Lock: a holder that ends removes the lock file (release, or its signal handler), so a file
    // locked here may have been unlinked meanwhile; the lock counts only while the path still
    // names the locked file.
    for (int attempt = 0; fd_ < 0; ++attempt) {
        fd_ = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd_ < 0) {
            const int error = errno;
            release();
            HALO_THROW(IoError, lock_path_.string(),
                       ": cannot create the lock file: ", std::strerror(error));
        }
        if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
            const int error = errno;
            ::close(fd_);
            fd_ = -1;
            if (error == EWOULDBLOCK) {
                HALO_THROW(InputError, "--out ", dir.string(),
                           ": another halo-infer job is writing this directory (it holds ",
                           lock_path_.string(), "); wait for it or choose another --out");
            }
            HALO_THROW(IoError, lock_path_.string(), ": cannot lock: ", std::strerror(error));
        }
        struct stat held {};
        struct stat named {};
        if (::fstat(fd_, &held) != 0 || ::stat(lock_path_.c_str(), &named) != 0 ||
            held.st_ino != named.st_ino || held.st_dev != named.st_dev) {
            ::close(fd_);
            fd_ = -1;
            HALO_EXPECTS(attempt < 100, lock_path_.string(), ": the lock file keeps changing");
        }
    }
    set_signal_cleanup(lock_path_, created_ ? dir_ : std::filesystem::path());

    std::vector<std::filesystem::path> found;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (is_result_file(entry.path().filename().string())) {
            found.push_back(entry.path());
        }
    }
    if (found.empty()) {
        return;
    }
    if (!overwrite) {
        std::sort(found.begin(), found.end());
        const auto manifest = result_manifest_path(dir);
        const bool complete = std::filesystem::exists(manifest);
        release();
        HALO_THROW(InputError, "--out ", dir.string(), ": holds ",
                   complete ? "another job's result (" : "pieces of an unfinished job (",
                   found.size(), " file", found.size() == 1 ? "" : "s", ", e.g. ",
                   found.front().filename().string(),
                   "); pass --overwrite to remove it first, or choose another --out");
    }
    // The manifest first: from then on the directory never reads as a result.
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
        const bool am = a.filename() == "manifest.json";
        const bool bm = b.filename() == "manifest.json";
        return am != bm ? am : a < b;
    });
    for (const auto& path : found) {
        std::filesystem::remove(path, ec);
        if (ec) {
            const auto message = ec.message();
            release();
            HALO_THROW(IoError, path.string(), ": cannot remove (--overwrite): ", message);
        }
    }
}

OutputDir::~OutputDir()
{
    release();
}

void OutputDir::release() noexcept
{
    signal_lock[0] = '\0';
    signal_dir[0] = '\0';
    if (fd_ >= 0) {
        std::error_code ec;
        std::filesystem::remove(lock_path_, ec);
        ::close(fd_);
        fd_ = -1;
    }
    if (created_) {
        std::error_code ec;
        if (std::filesystem::is_empty(dir_, ec) && !ec) {
            std::filesystem::remove(dir_, ec);
        }
        created_ = false;
    }
}

}  // namespace halo::job
