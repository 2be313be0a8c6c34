// AtomicH5File (hdf5_util.hpp): a file written under a temporary name, flushed to stable
// storage and renamed into place.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "hdf5_util.hpp"

namespace halo::store {

namespace {

// Flushes a file (or directory) to stable storage, so that the rename that publishes a file never
// points at data still in the page cache after a power loss.
bool sync_path(const std::filesystem::path& path, bool directory)
{
    const int fd = ::open(path.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
    if (fd < 0) {
        return false;
    }
    const bool ok = ::fsync(fd) == 0;
    ::close(fd);
    return ok;
}

}  // namespace

// Asks the kernel every 50 ms to start writing the file's dirty pages back (without waiting for
// them), until stopped. Its own read-only descriptor: sync_file_range acts on the file's pages,
// whoever wrote them. Best effort: a file system without it leaves everything to the fsync.
class AtomicH5File::Writeback {
public:
    explicit Writeback(const std::filesystem::path& file)
        : fd_(::open(file.c_str(), O_RDONLY | O_CLOEXEC))
    {
        if (fd_ >= 0) {
            thread_ = std::thread([this] { run(); });
        }
    }
    ~Writeback()
    {
        {
            const std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        wake_.notify_one();
        if (thread_.joinable()) {
            thread_.join();
        }
        if (fd_ >= 0) {
            ::close(fd_);
        }
    }
    Writeback(const Writeback&) = delete;
    Writeback& operator=(const Writeback&) = delete;

private:
    void run()
    {
        std::unique_lock<std::mutex> lock(mutex_);
        while (!wake_.wait_for(lock, std::chrono::milliseconds(50), [this] { return stop_; })) {
            lock.unlock();
            const bool ok = ::sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WRITE) == 0;
            lock.lock();
            if (!ok) {
                return;
            }
        }
    }

    int fd_ = -1;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stop_ = false;
    std::thread thread_;
};

AtomicH5File::AtomicH5File(const std::filesystem::path& target, Durability durability)
    : target_(target), name_(target.string()), durability_(durability)
{
    const auto parent =
        target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
    std::error_code ec;
    if (!std::filesystem::is_directory(parent, ec)) {
        HALO_THROW(IoError, name_, ": directory ", parent.string(), " does not exist");
    }
    temp_ = target;
    temp_ += ".tmp-" + std::to_string(::getpid());
    try {
        handle_ = create_file(temp_.string(), name_);
        if (durability_ == Durability::synced) {
            writeback_ = std::make_unique<Writeback>(temp_);
        }
    } catch (...) {
        // No destructor runs for an object whose constructor throws: H5Fcreate may have made
        // the file before it failed (a full file system), so remove it here.
        const QuietErrors quiet;
        handle_.reset();
        std::error_code ignored;
        std::filesystem::remove(temp_, ignored);
        throw;
    }
}

AtomicH5File::~AtomicH5File()
{
    writeback_.reset();
    if (committed_) {
        return;
    }
    const QuietErrors quiet;
    handle_.reset();
    std::error_code ignored;
    std::filesystem::remove(temp_, ignored);
}

void AtomicH5File::commit()
{
    HALO_EXPECTS(!committed_, name_, ": committed twice");
    if (handle_.close() < 0) {
        detail::throw_hdf5_error("H5Fclose", name_ + " (temporary file " + temp_.string() + ")",
                                 __FILE__, __LINE__);
    }
    writeback_.reset();
    const bool synced = durability_ == Durability::synced;
    if (synced && !sync_path(temp_, false)) {
        HALO_THROW(IoError, name_, ": cannot flush ", temp_.string(), ": ", std::strerror(errno));
    }
    std::error_code ec;
    std::filesystem::rename(temp_, target_, ec);
    if (ec) {
        HALO_THROW(IoError, name_, ": cannot rename ", temp_.string(),
                   " into place: ", ec.message());
    }
    committed_ = true;
    // Makes the rename itself durable; some file systems refuse to sync a directory, and the data
    // is already safe, so a failure here is not an error.
    if (synced) {
        sync_path(target_.has_parent_path() ? target_.parent_path() : std::filesystem::path("."),
                  true);
    }
}

void AtomicH5File::commit_as(const std::string& format)
{
    write_attribute_string(get(), Where{name_, "/"}, "format", format);
    commit();
}

}  // namespace halo::store
