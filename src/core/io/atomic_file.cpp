// Output files that appear under their name only when complete: write to a temporary file in the
// same directory (so the rename stays within one file system and is atomic), fsync, rename.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "halo/core/io.hpp"
#include "io_detail.hpp"

namespace halo::io_detail {

AtomicFile::AtomicFile(const std::filesystem::path& target) : target_(target)
{
    static std::atomic<unsigned> counter{0};
    const auto dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
    // Hidden and marked, so that a leftover from a killed process is easy to tell apart.
    std::string stem(".");
    stem += target.filename().string();
    stem += ".tmp." + std::to_string(::getpid()) + ".";
    for (int attempt = 0; attempt < 100; ++attempt) {
        temp_ = dir / (stem + std::to_string(counter.fetch_add(1)));
        fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd_ >= 0) {
            return;
        }
        if (errno != EEXIST && errno != EINTR) {
            break;
        }
    }
    const int err = errno;
    temp_.clear();
    HALO_THROW(IoError, target_.string(), ": cannot create a temporary file in ", dir.string(),
               ": ", std::strerror(err));
}

AtomicFile::~AtomicFile()
{
    if (fd_ >= 0) {
        ::close(fd_);
    }
    if (!temp_.empty()) {
        ::unlink(temp_.c_str());
    }
}

void AtomicFile::write(const void* data, std::size_t bytes)
{
    HALO_EXPECTS(fd_ >= 0, "write after commit to ", target_.string());
    const auto* p = static_cast<const char*>(data);
    while (bytes > 0) {
        const auto done = ::write(fd_, p, std::min<std::size_t>(bytes, std::size_t{1} << 30));
        if (done < 0) {
            if (errno == EINTR) {
                continue;
            }
            HALO_THROW(IoError, target_.string(), ": write failed: ", std::strerror(errno));
        }
        p += done;
        bytes -= static_cast<std::size_t>(done);
    }
}

void AtomicFile::commit()
{
    HALO_EXPECTS(fd_ >= 0, "commit twice to ", target_.string());
    if (::fsync(fd_) != 0) {
        HALO_THROW(IoError, target_.string(), ": fsync failed: ", std::strerror(errno));
    }
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) {
        HALO_THROW(IoError, target_.string(), ": close failed: ", std::strerror(errno));
    }
    if (std::rename(temp_.c_str(), target_.c_str()) != 0) {
        HALO_THROW(IoError, target_.string(), ": cannot rename the temporary file ", temp_.string(),
                   " onto it: ", std::strerror(errno));
    }
    temp_.clear();
    // Make the rename itself durable; a failure here leaves a complete file either way.
    const auto dir = target_.has_parent_path() ? target_.parent_path() : std::filesystem::path(".");
    const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
        ::fsync(dir_fd);
        ::close(dir_fd);
    }
}

}  // namespace halo::io_detail

namespace halo {

void write_file_atomic(const std::filesystem::path& path, std::string_view contents)
{
    io_detail::AtomicFile file(path);
    file.write(contents.data(), contents.size());
    file.commit();
}

}  // namespace halo
