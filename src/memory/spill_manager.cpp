#include <spillway/memory/spill_manager.hpp>

#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>

#include <algorithm>
#include <vector>

namespace spillway {

SpillManager::~SpillManager() {
  stop_background();
}

SpillManager::FunctionId SpillManager::add_spill_function(SpillFunction fn, int priority) {
  SPILLWAY_EXPECTS(static_cast<bool>(fn), "a spill function must not be empty");
  std::lock_guard lock(mutex_);
  const FunctionId id = next_id_++;
  functions_.emplace(id, Entry{std::move(fn), priority, 0});
  return id;
}

void SpillManager::remove_spill_function(FunctionId id) {
  std::unique_lock lock(mutex_);
  auto it = functions_.find(id);
  if (it == functions_.end()) return;
  idle_cv_.wait(lock, [&] { return it->second.running == 0; });
  functions_.erase(it);
}

std::size_t SpillManager::spill(MemoryType tier, std::size_t bytes) {
  std::vector<std::pair<int, FunctionId>> order;
  {
    std::lock_guard lock(mutex_);
    order.reserve(functions_.size());
    for (const auto& [id, e] : functions_) order.emplace_back(e.priority, id);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::size_t freed = 0;
  for (const auto& [priority, id] : order) {
    if (freed >= bytes) break;
    SpillFunction fn;
    {
      std::lock_guard lock(mutex_);
      auto it = functions_.find(id);
      if (it == functions_.end()) continue;
      it->second.running += 1;
      fn = it->second.fn;
    }
    struct Done {
      SpillManager& sm;
      FunctionId id;
      ~Done() {
        std::lock_guard lock(sm.mutex_);
        auto it = sm.functions_.find(id);
        if (it != sm.functions_.end() && --it->second.running == 0) sm.idle_cv_.notify_all();
      }
    } done{*this, id};
    freed += fn(tier, bytes - freed);
  }
  return freed;
}

void SpillManager::start_background(std::chrono::milliseconds period,
                                    std::array<std::size_t, 4> headroom) {
  SPILLWAY_EXPECTS(period.count() > 0, "the background spill period must be positive");
  stop_background();
  {
    std::lock_guard lock(bg_mutex_);
    bg_stop_ = false;
  }
  bg_thread_ = std::thread([this, period, headroom] {
    std::unique_lock lock(bg_mutex_);
    while (!bg_cv_.wait_for(lock, period, [this] { return bg_stop_; })) {
      lock.unlock();
      for (MemoryType t : all_memory_types) {
        const std::size_t want = headroom[index(t)];
        if (want == 0) continue;
        const std::size_t avail = available_(t);
        if (avail >= want) continue;
        try {
          const std::size_t freed = spill(t, want - avail);
          SPILLWAY_LOG(debug, "background spill freed " << freed << " bytes of " << to_string(t));
        } catch (const std::exception& e) {
          SPILLWAY_LOG(warn, "background spill of " << to_string(t) << " failed: " << e.what());
        }
      }
      lock.lock();
    }
  });
}

void SpillManager::stop_background() {
  {
    std::lock_guard lock(bg_mutex_);
    bg_stop_ = true;
  }
  bg_cv_.notify_all();
  if (bg_thread_.joinable()) bg_thread_.join();
}

}  // namespace spillway
