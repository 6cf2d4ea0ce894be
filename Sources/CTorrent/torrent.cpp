// The C face of libtorrent-rasterbar that Haul's Swift code calls (see include/haul_torrent.h).

#include "haul_torrent.h"

#include <libtorrent/add_torrent_params.hpp>
#include <libtorrent/alert_types.hpp>
#include <libtorrent/bdecode.hpp>
#include <libtorrent/bencode.hpp>
#include <libtorrent/create_torrent.hpp>
#include <libtorrent/hex.hpp>
#include <libtorrent/ip_filter.hpp>
#include <libtorrent/magnet_uri.hpp>
#include <libtorrent/posix_disk_io.hpp>
#include <libtorrent/read_resume_data.hpp>
#include <libtorrent/session.hpp>
#include <libtorrent/session_params.hpp>
#include <libtorrent/torrent_info.hpp>
#include <libtorrent/torrent_status.hpp>
#include <libtorrent/write_resume_data.hpp>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace lt = libtorrent;

struct haul_torrent_session {
    std::unique_ptr<lt::session> session;
    std::map<uint64_t, lt::torrent_handle> torrents;
    std::map<lt::torrent_handle, uint64_t> keys;
    // Removed torrents whose files are being deleted: their key is still needed for the deletion's event.
    std::map<std::string, uint64_t> deleting;
    std::deque<haul_torrent_event> events;
};

namespace {

char *copy(std::string const &text) {
    char *out = static_cast<char *>(std::malloc(text.size() + 1));
    if (out == nullptr) return nullptr;
    std::memcpy(out, text.data(), text.size());
    out[text.size()] = 0;
    return out;
}

std::string hash_of(lt::info_hash_t const &hashes) {
    if (hashes.has_v1()) return lt::aux::to_hex(hashes.v1);
    if (hashes.has_v2()) return lt::aux::to_hex(hashes.v2);
    return "";
}

void put_hash(char out[65], lt::info_hash_t const &hashes) {
    std::string hex = hash_of(hashes);
    std::snprintf(out, 65, "%s", hex.c_str());
}

lt::settings_pack pack_of(haul_torrent_settings const *settings) {
    lt::settings_pack pack;
    pack.set_str(lt::settings_pack::listen_interfaces, settings->listen_interfaces);
    if (settings->outgoing_interface != nullptr)
        pack.set_str(lt::settings_pack::outgoing_interfaces, settings->outgoing_interface);
    pack.set_str(lt::settings_pack::user_agent, settings->user_agent);
    pack.set_bool(lt::settings_pack::enable_dht, settings->dht != 0);
    pack.set_bool(lt::settings_pack::enable_lsd, settings->lsd != 0);
    pack.set_bool(lt::settings_pack::enable_upnp, settings->upnp != 0);
    pack.set_bool(lt::settings_pack::enable_natpmp, settings->natpmp != 0);
    int policy = settings->encryption == 1   ? lt::settings_pack::pe_forced
                 : settings->encryption == 2 ? lt::settings_pack::pe_disabled
                                             : lt::settings_pack::pe_enabled;
    pack.set_int(lt::settings_pack::out_enc_policy, policy);
    pack.set_int(lt::settings_pack::in_enc_policy, policy);
    pack.set_int(lt::settings_pack::upload_rate_limit, int(std::min<int64_t>(settings->upload_limit, INT32_MAX)));
    pack.set_int(lt::settings_pack::download_rate_limit, int(std::min<int64_t>(settings->download_limit, INT32_MAX)));
    if (settings->max_connections > 0) pack.set_int(lt::settings_pack::connections_limit, settings->max_connections);
    pack.set_int(lt::settings_pack::alert_mask,
                 int(lt::alert_category::status | lt::alert_category::error | lt::alert_category::storage |
                     lt::alert_category::file_progress));
    // Haul's scheduler decides what runs; libtorrent's queue would pause torrents on its own.
    pack.set_int(lt::settings_pack::active_downloads, -1);
    pack.set_int(lt::settings_pack::active_seeds, -1);
    pack.set_int(lt::settings_pack::active_limit, -1);
    // TCP to peers: uTP's delay-based congestion control (LEDBAT) yields to any other traffic and held a
    // transfer from one fast peer to a fraction of TCP's rate (16 MB/s against over 200 on loopback).
    pack.set_bool(lt::settings_pack::enable_outgoing_utp, false);
    pack.set_bool(lt::settings_pack::enable_incoming_utp, false);
    // Peers on the same address (a test's seeder and tracker on loopback, peers behind one NAT).
    pack.set_bool(lt::settings_pack::allow_multiple_connections_per_ip, true);
    pack.set_int(lt::settings_pack::proxy_type, settings->proxy_type == 1   ? lt::settings_pack::socks5
                                                : settings->proxy_type == 2 ? lt::settings_pack::http
                                                                            : lt::settings_pack::none);
    if (settings->proxy_type != 0) {
        bool auth = settings->proxy_user != nullptr && settings->proxy_user[0] != 0;
        if (auth)
            pack.set_int(lt::settings_pack::proxy_type, settings->proxy_type == 1 ? lt::settings_pack::socks5_pw
                                                                                 : lt::settings_pack::http_pw);
        pack.set_str(lt::settings_pack::proxy_hostname, settings->proxy_host ? settings->proxy_host : "");
        pack.set_int(lt::settings_pack::proxy_port, settings->proxy_port);
        if (auth) {
            pack.set_str(lt::settings_pack::proxy_username, settings->proxy_user);
            pack.set_str(lt::settings_pack::proxy_password, settings->proxy_password ? settings->proxy_password : "");
        }
        pack.set_bool(lt::settings_pack::proxy_peer_connections, true);
        pack.set_bool(lt::settings_pack::proxy_tracker_connections, true);
        pack.set_bool(lt::settings_pack::proxy_hostnames, true);
    }
    return pack;
}

lt::ip_filter filter_of(char const *ranges) {
    lt::ip_filter filter;
    if (ranges == nullptr) return filter;
    std::istringstream lines(ranges);
    std::string line;
    while (std::getline(lines, line)) {
        // "+first-last" allows again what an earlier line blocked.
        bool allowed = !line.empty() && line[0] == '+';
        if (allowed) line.erase(0, 1);
        auto dash = line.find('-');
        if (dash == std::string::npos) continue;
        lt::error_code ec1, ec2;
        auto first = lt::make_address(line.substr(0, dash), ec1);
        auto last = lt::make_address(line.substr(dash + 1), ec2);
        if (ec1 || ec2 || first.is_v4() != last.is_v4()) continue;
        filter.add_rule(first, last, allowed ? 0 : lt::ip_filter::blocked);
    }
    return filter;
}

void push(haul_torrent_session *s, int kind, uint64_t key, std::string const &message = "") {
    haul_torrent_event event{};
    event.kind = kind;
    event.key = key;
    event.message = message.empty() ? nullptr : copy(message);
    s->events.push_back(event);
}

bool key_of(haul_torrent_session *s, lt::torrent_handle const &handle, uint64_t &key) {
    auto found = s->keys.find(handle);
    if (found == s->keys.end()) return false;
    key = found->second;
    return true;
}

void forget(haul_torrent_session *s, uint64_t key) {
    auto found = s->torrents.find(key);
    if (found == s->torrents.end()) return;
    s->torrents.erase(found);
}

void translate(haul_torrent_session *s, lt::alert *alert) {
    uint64_t key = 0;
    if (auto *a = lt::alert_cast<lt::metadata_received_alert>(alert)) {
        if (key_of(s, a->handle, key)) push(s, HAUL_TORRENT_METADATA, key);
    } else if (auto *a = lt::alert_cast<lt::torrent_finished_alert>(alert)) {
        if (key_of(s, a->handle, key)) push(s, HAUL_TORRENT_FINISHED, key);
    } else if (auto *a = lt::alert_cast<lt::torrent_checked_alert>(alert)) {
        if (key_of(s, a->handle, key)) push(s, HAUL_TORRENT_CHECKED, key);
    } else if (auto *a = lt::alert_cast<lt::torrent_paused_alert>(alert)) {
        if (key_of(s, a->handle, key)) push(s, HAUL_TORRENT_PAUSED, key);
    } else if (auto *a = lt::alert_cast<lt::torrent_resumed_alert>(alert)) {
        if (key_of(s, a->handle, key)) push(s, HAUL_TORRENT_RESUMED, key);
    } else if (auto *a = lt::alert_cast<lt::piece_finished_alert>(alert)) {
        if (key_of(s, a->handle, key)) {
            push(s, HAUL_TORRENT_PIECE, key);
            s->events.back().piece = int(static_cast<int>(a->piece_index));
        }
    } else if (auto *a = lt::alert_cast<lt::torrent_error_alert>(alert)) {
        if (key_of(s, a->handle, key))
            push(s, HAUL_TORRENT_ERROR, key, a->error.message() + (a->filename()[0] ? std::string(": ") + a->filename() : ""));
    } else if (auto *a = lt::alert_cast<lt::file_error_alert>(alert)) {
        if (key_of(s, a->handle, key))
            push(s, HAUL_TORRENT_FILE_ERROR, key, a->error.message() + ": " + a->filename());
    } else if (auto *a = lt::alert_cast<lt::save_resume_data_alert>(alert)) {
        if (key_of(s, a->handle, key)) {
            std::vector<char> buffer = lt::write_resume_data_buf(a->params);
            haul_torrent_event event{};
            event.kind = HAUL_TORRENT_RESUME_DATA;
            event.key = key;
            event.data = std::malloc(buffer.size() ? buffer.size() : 1);
            if (event.data != nullptr) {
                std::memcpy(event.data, buffer.data(), buffer.size());
                event.length = buffer.size();
            }
            s->events.push_back(event);
        }
    } else if (auto *a = lt::alert_cast<lt::save_resume_data_failed_alert>(alert)) {
        if (key_of(s, a->handle, key)) push(s, HAUL_TORRENT_RESUME_FAILED, key, a->error.message());
    } else if (auto *a = lt::alert_cast<lt::torrent_removed_alert>(alert)) {
        auto found = s->keys.find(a->handle);
        if (found != s->keys.end()) {
            key = found->second;
            s->keys.erase(found);
            push(s, HAUL_TORRENT_REMOVED, key);
        }
    } else if (auto *a = lt::alert_cast<lt::torrent_deleted_alert>(alert)) {
        auto found = s->deleting.find(hash_of(a->info_hashes));
        if (found != s->deleting.end()) {
            push(s, HAUL_TORRENT_FILES_DELETED, found->second);
            s->deleting.erase(found);
        }
    } else if (auto *a = lt::alert_cast<lt::torrent_delete_failed_alert>(alert)) {
        auto found = s->deleting.find(hash_of(a->info_hashes));
        if (found != s->deleting.end()) {
            push(s, HAUL_TORRENT_DELETE_FAILED, found->second, a->error.message());
            s->deleting.erase(found);
        }
    } else if (auto *a = lt::alert_cast<lt::listen_failed_alert>(alert)) {
        push(s, HAUL_TORRENT_LISTEN_FAILED, 0, a->error.message() + " (" + a->address.to_string() + ")");
    }
}

lt::torrent_handle *find(haul_torrent_session *s, uint64_t key) {
    auto found = s->torrents.find(key);
    return found == s->torrents.end() ? nullptr : &found->second;
}

// The raw path elements of the info dictionary's files: what the .torrent says, before libtorrent makes it safe.
bool raw_files(lt::bdecode_node const &info, std::vector<lt::bdecode_node> &files) {
    lt::bdecode_node list = info.dict_find_list("files");
    if (!list) return false;
    for (int i = 0; i < list.list_size(); ++i) files.push_back(list.list_at(i));
    return true;
}

lt::bdecode_node info_of(lt::bdecode_node const &root) {
    return root.dict_find_dict("info");
}

}  // namespace

extern "C" {

haul_torrent_session *haul_torrent_session_new(haul_torrent_settings const *settings, int wake_fd, char **error) {
    *error = nullptr;
    try {
        lt::session_params params(pack_of(settings));
        // pread and pwrite, as Haul's own transfers write: libtorrent's default maps the files into memory, which
        // the server's resident size then counts in full (a 1 GiB torrent showed 1 GiB resident) and a full disk
        // turns into SIGBUS instead of an error.
        params.disk_io_constructor = lt::posix_disk_io_constructor;
        auto *s = new haul_torrent_session();
        s->session = std::make_unique<lt::session>(std::move(params));
        s->session->set_ip_filter(filter_of(settings->blocked_ranges));
        s->session->set_alert_notify([wake_fd] {
            char byte = 1;
            // A full pipe already says that alerts wait.
            ssize_t written = ::write(wake_fd, &byte, 1);
            (void)written;
        });
        return s;
    } catch (std::exception const &e) {
        *error = copy(e.what());
        return nullptr;
    }
}

void haul_torrent_session_apply(haul_torrent_session *s, haul_torrent_settings const *settings) {
    s->session->apply_settings(pack_of(settings));
    s->session->set_ip_filter(filter_of(settings->blocked_ranges));
}

void haul_torrent_session_free(haul_torrent_session *s) {
    if (s == nullptr) return;
    s->session->set_alert_notify([] {});
    // Joins libtorrent's threads: nothing of it runs after this.
    s->session.reset();
    for (auto &event : s->events) {
        std::free(event.message);
        std::free(event.data);
    }
    delete s;
}

int haul_torrent_listen_port(haul_torrent_session *s) { return s->session->listen_port(); }

void haul_torrent_free(void *pointer) { std::free(pointer); }

int haul_torrent_parse(void const *bytes, size_t length, int64_t max_bytes, int max_files, haul_torrent_meta *meta) {
    std::memset(meta, 0, sizeof *meta);
    if (int64_t(length) > max_bytes) {
        meta->error = copy("the metadata is larger than the limit");
        return -1;
    }
    lt::error_code ec;
    int pos = 0;
    lt::bdecode_node root =
        lt::bdecode(lt::span<char const>(static_cast<char const *>(bytes), long(length)), ec, &pos, 100, 10000000);
    if (ec) {
        meta->error = copy("not a torrent file: " + ec.message());
        return -1;
    }
    lt::bdecode_node info = root.type() == lt::bdecode_node::dict_t ? info_of(root) : lt::bdecode_node();
    if (!info) {
        meta->error = copy("not a torrent file: no info dictionary");
        return -1;
    }
    lt::bdecode_node files = info.dict_find_list("files");
    if (files && files.list_size() > max_files) {
        meta->error = copy("the torrent has " + std::to_string(files.list_size()) + " files, more than " +
                           std::to_string(max_files));
        return -1;
    }
    lt::load_torrent_limits limits;
    limits.max_buffer_size = int(std::min<int64_t>(max_bytes, INT32_MAX));
    limits.max_decode_tokens = 10000000;
    try {
        lt::torrent_info ti(lt::span<char const>(static_cast<char const *>(bytes), long(length)), limits, lt::from_span);
        if (ti.num_files() > max_files) {
            meta->error = copy("the torrent has " + std::to_string(ti.num_files()) + " files, more than " +
                               std::to_string(max_files));
            return -1;
        }
        put_hash(meta->info_hash, ti.info_hashes());
        meta->name = copy(std::string(info.dict_find_string_value("name")));
        meta->total_size = ti.total_size();
        meta->piece_length = ti.piece_length();
        meta->num_pieces = ti.num_pieces();
        meta->num_files = files ? files.list_size() : ti.num_files();
        return 0;
    } catch (std::exception const &e) {
        meta->error = copy(std::string("not a valid torrent: ") + e.what());
        return -1;
    }
}

void haul_torrent_meta_clear(haul_torrent_meta *meta) {
    std::free(meta->name);
    std::free(meta->error);
    meta->name = nullptr;
    meta->error = nullptr;
}

int haul_torrent_parse_file(void const *bytes, size_t length, int index, char **path, int64_t *size, int *pad) {
    *path = nullptr;
    *size = 0;
    *pad = 0;
    lt::error_code ec;
    int pos = 0;
    lt::bdecode_node root =
        lt::bdecode(lt::span<char const>(static_cast<char const *>(bytes), long(length)), ec, &pos, 100, 10000000);
    if (ec || root.type() != lt::bdecode_node::dict_t) return -1;
    lt::bdecode_node info = info_of(root);
    if (!info) return -1;
    std::vector<lt::bdecode_node> files;
    if (!raw_files(info, files)) {
        if (index != 0) return -1;
        *path = copy(std::string(info.dict_find_string_value("name")));
        *size = info.dict_find_int_value("length", 0);
        return 0;
    }
    if (index < 0 || index >= int(files.size())) return -1;
    lt::bdecode_node file = files[size_t(index)];
    if (file.type() != lt::bdecode_node::dict_t) return -1;
    lt::bdecode_node elements = file.dict_find_list("path.utf-8");
    if (!elements) elements = file.dict_find_list("path");
    std::string joined(info.dict_find_string_value("name"));
    if (elements) {
        for (int i = 0; i < elements.list_size(); ++i) {
            joined += '/';
            lt::bdecode_node element = elements.list_at(i);
            joined += element.type() == lt::bdecode_node::string_t ? std::string(element.string_value()) : "";
        }
    }
    *path = copy(joined);
    *size = file.dict_find_int_value("length", 0);
    std::string attributes(file.dict_find_string_value("attr"));
    *pad = attributes.find('p') != std::string::npos ? 1 : 0;
    return 0;
}

int haul_torrent_add(haul_torrent_session *s, haul_torrent_add_params const *params, char **error) {
    *error = nullptr;
    lt::error_code ec;
    lt::add_torrent_params atp;
    if (params->resume != nullptr && params->resume_length > 0) {
        atp = lt::read_resume_data(
            lt::span<char const>(static_cast<char const *>(params->resume), long(params->resume_length)), ec);
        if (ec) atp = lt::add_torrent_params();
        ec.clear();
    }
    if (!atp.ti && params->torrent != nullptr) {
        try {
            auto ti = std::make_shared<lt::torrent_info>(
                lt::span<char const>(static_cast<char const *>(params->torrent), long(params->torrent_length)),
                lt::from_span);
            atp.ti = ti;
        } catch (std::exception const &e) {
            *error = copy(std::string("not a valid torrent: ") + e.what());
            return -1;
        }
    }
    if (!atp.ti && atp.info_hashes.has_v1() == false && atp.info_hashes.has_v2() == false) {
        if (params->magnet == nullptr) {
            *error = copy("neither a magnet link nor a torrent file");
            return -1;
        }
        lt::parse_magnet_uri(params->magnet, atp, ec);
        if (ec) {
            *error = copy("not a valid magnet link: " + ec.message());
            return -1;
        }
    } else if (params->magnet != nullptr) {
        // Peers and trackers the magnet names still count with resume data.
        lt::add_torrent_params magnet = lt::parse_magnet_uri(params->magnet, ec);
        if (!ec) {
            for (auto const &peer : magnet.peers) atp.peers.push_back(peer);
            for (auto const &tracker : magnet.trackers) atp.trackers.push_back(tracker);
        }
        ec.clear();
    }
    atp.save_path = params->save_path;
    if (params->root != nullptr && params->root[0] != '\0' && atp.ti) {
        lt::file_storage const &files = atp.ti->files();
        for (auto index : files.file_range()) {
            std::string path = files.file_path(index);
            auto slash = path.find('/');
            std::string renamed = std::string(params->root) + (slash == std::string::npos ? "" : path.substr(slash));
            if (renamed != path) atp.renamed_files[index] = renamed;
        }
    }
    atp.flags &= ~lt::torrent_flags::auto_managed;
    atp.flags &= ~lt::torrent_flags::paused;
    if (params->paused) atp.flags |= lt::torrent_flags::paused;
    if (params->hold) atp.flags |= lt::torrent_flags::upload_mode;
    if (params->sequential) atp.flags |= lt::torrent_flags::sequential_download;
    atp.upload_limit = int(std::min<int64_t>(params->upload_limit, INT32_MAX));
    atp.download_limit = int(std::min<int64_t>(params->download_limit, INT32_MAX));
    if (params->max_connections > 0) atp.max_connections = params->max_connections;
    if (params->trackers != nullptr) {
        std::istringstream lines(params->trackers);
        std::string line;
        while (std::getline(lines, line))
            if (!line.empty()) atp.trackers.push_back(line);
    }
    if (params->peers != nullptr) {
        std::istringstream lines(params->peers);
        std::string line;
        while (std::getline(lines, line)) {
            auto colon = line.rfind(':');
            if (colon == std::string::npos) continue;
            std::string host = line.substr(0, colon);
            if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
            lt::error_code parse;
            auto address = lt::make_address(host, parse);
            int port = std::atoi(line.c_str() + colon + 1);
            if (!parse && port > 0 && port < 65536) atp.peers.emplace_back(address, std::uint16_t(port));
        }
    }
    lt::torrent_handle handle = s->session->add_torrent(std::move(atp), ec);
    if (ec) {
        *error = copy(ec.message());
        return -1;
    }
    auto old = s->torrents.find(params->key);
    if (old != s->torrents.end()) s->keys.erase(old->second);
    s->torrents[params->key] = handle;
    s->keys[handle] = params->key;
    return 0;
}

void haul_torrent_remove(haul_torrent_session *s, uint64_t key, int delete_files) {
    lt::torrent_handle *handle = find(s, key);
    if (handle == nullptr) return;
    if (delete_files) {
        lt::torrent_status status = handle->status(lt::torrent_handle::query_name);
        s->deleting[hash_of(status.info_hashes)] = key;
    }
    s->session->remove_torrent(*handle, delete_files ? lt::session::delete_files : lt::remove_flags_t{});
    forget(s, key);
}

void haul_torrent_pause(haul_torrent_session *s, uint64_t key) {
    if (auto *handle = find(s, key)) handle->pause(lt::torrent_handle::graceful_pause);
}

void haul_torrent_resume(haul_torrent_session *s, uint64_t key) {
    if (auto *handle = find(s, key)) {
        handle->unset_flags(lt::torrent_flags::upload_mode);
        handle->resume();
    }
}

void haul_torrent_save_resume(haul_torrent_session *s, uint64_t key, int flush) {
    if (auto *handle = find(s, key)) {
        lt::resume_data_flags_t flags = lt::torrent_handle::save_info_dict;
        if (flush) flags |= lt::torrent_handle::flush_disk_cache;
        handle->save_resume_data(flags);
    }
}

void haul_torrent_set_limits(haul_torrent_session *s, uint64_t key, int64_t upload_limit, int64_t download_limit) {
    if (auto *handle = find(s, key)) {
        handle->set_upload_limit(int(std::min<int64_t>(upload_limit, INT32_MAX)));
        handle->set_download_limit(int(std::min<int64_t>(download_limit, INT32_MAX)));
    }
}

void haul_torrent_set_sequential(haul_torrent_session *s, uint64_t key, int sequential) {
    if (auto *handle = find(s, key)) {
        if (sequential)
            handle->set_flags(lt::torrent_flags::sequential_download);
        else
            handle->unset_flags(lt::torrent_flags::sequential_download);
    }
}

void haul_torrent_set_file_priorities(haul_torrent_session *s, uint64_t key, uint8_t const *priorities, int count) {
    auto *handle = find(s, key);
    if (handle == nullptr) return;
    std::vector<lt::download_priority_t> list;
    list.reserve(size_t(count));
    for (int i = 0; i < count; ++i) list.push_back(lt::download_priority_t(priorities[i]));
    handle->prioritize_files(list);
}

void haul_torrent_first_last(haul_torrent_session *s, uint64_t key) {
    auto *handle = find(s, key);
    if (handle == nullptr) return;
    auto ti = handle->torrent_file();
    if (!ti) return;
    auto const &files = ti->files();
    auto priorities = handle->get_file_priorities();
    for (lt::file_index_t index : files.file_range()) {
        if (files.pad_file_at(index) || files.file_size(index) == 0) continue;
        if (size_t(static_cast<int>(index)) < priorities.size() &&
            priorities[size_t(static_cast<int>(index))] == lt::dont_download)
            continue;
        auto first = ti->map_file(index, 0, 1).piece;
        auto last = ti->map_file(index, files.file_size(index) - 1, 1).piece;
        handle->piece_priority(first, lt::top_priority);
        handle->piece_priority(last, lt::top_priority);
        handle->set_piece_deadline(first, 0);
        handle->set_piece_deadline(last, 0);
    }
}

void haul_torrent_want_range(haul_torrent_session *s, uint64_t key, int index, int64_t offset, int64_t length) {
    auto *handle = find(s, key);
    if (handle == nullptr) return;
    auto ti = handle->torrent_file();
    if (!ti || index < 0 || index >= ti->num_files() || length <= 0) return;
    lt::file_index_t file(index);
    int64_t size = ti->files().file_size(file);
    if (offset >= size) return;
    auto first = ti->map_file(file, offset, 1).piece;
    auto last = ti->map_file(file, std::min(size, offset + length) - 1, 1).piece;
    int deadline = 0;
    for (auto piece = first; piece <= last; ++piece) {
        if (handle->have_piece(piece)) continue;
        handle->set_piece_deadline(piece, deadline);
        deadline += 100;
    }
}

int haul_torrent_file_have(haul_torrent_session *s, uint64_t key, int index, int64_t *ranges, int capacity) {
    auto *handle = find(s, key);
    if (handle == nullptr || capacity <= 0) return 0;
    auto ti = handle->torrent_file();
    if (!ti || index < 0 || index >= ti->num_files()) return 0;
    lt::file_index_t file(index);
    int64_t size = ti->files().file_size(file);
    if (size <= 0) return 0;
    int64_t start = ti->files().file_offset(file);
    int64_t piece_length = ti->piece_length();
    lt::torrent_status st = handle->status(lt::torrent_handle::query_pieces);
    // A seed's bitfield may be left empty: it has every piece.
    bool all = st.pieces.empty() && st.is_seeding;
    auto first = lt::piece_index_t(int(start / piece_length));
    auto last = lt::piece_index_t(int((start + size - 1) / piece_length));
    int n = 0;
    int64_t open = -1, end = -1;
    for (auto piece = first; piece <= last; ++piece) {
        int64_t piece_start = int64_t(static_cast<int>(piece)) * piece_length;
        int64_t from = std::max<int64_t>(piece_start, start) - start;
        int64_t to = std::min<int64_t>(piece_start + ti->piece_size(piece), start + size) - start - 1;
        bool have = all || (static_cast<int>(piece) < st.pieces.size() && st.pieces[piece]);
        if (have) {
            if (open < 0) open = from;
            end = to;
        } else if (open >= 0) {
            ranges[2 * n] = open;
            ranges[2 * n + 1] = end;
            open = -1;
            if (++n == capacity) return n;
        }
    }
    if (open >= 0) {
        ranges[2 * n] = open;
        ranges[2 * n + 1] = end;
        ++n;
    }
    return n;
}

void haul_torrent_force_recheck(haul_torrent_session *s, uint64_t key) {
    if (auto *handle = find(s, key)) handle->force_recheck();
}

void haul_torrent_status_of(haul_torrent_session *s, uint64_t key, haul_torrent_status *out) {
    std::memset(out, 0, sizeof *out);
    auto *handle = find(s, key);
    if (handle == nullptr || !handle->is_valid()) return;
    lt::torrent_status st = handle->status({});
    out->found = 1;
    out->state = int(st.state);
    out->has_metadata = st.has_metadata;
    out->paused = bool(st.flags & lt::torrent_flags::paused);
    out->finished = st.is_finished;
    out->seeding = st.is_seeding;
    out->errored = st.errc ? 1 : 0;
    out->moving = st.moving_storage;
    out->total_size = st.total_wanted;
    out->total_done = st.total_wanted_done;
    out->all_time_upload = st.all_time_upload;
    out->all_time_download = st.all_time_download;
    out->download_rate = st.download_payload_rate;
    out->upload_rate = st.upload_payload_rate;
    out->num_peers = st.num_peers;
    out->num_seeds = st.num_seeds;
    out->list_seeds = st.list_seeds;
    out->list_peers = st.list_peers;
    out->seeding_seconds = std::chrono::duration_cast<std::chrono::seconds>(st.seeding_duration).count();
    out->active_seconds = std::chrono::duration_cast<std::chrono::seconds>(st.active_duration).count();
    auto ti = st.has_metadata ? handle->torrent_file() : nullptr;
    out->num_pieces = ti ? ti->num_pieces() : 0;
    out->pieces_done = st.num_pieces;
    put_hash(out->info_hash, st.info_hashes);
}

char *haul_torrent_name(haul_torrent_session *s, uint64_t key) {
    auto *handle = find(s, key);
    if (handle == nullptr) return nullptr;
    lt::torrent_status st = handle->status(lt::torrent_handle::query_name);
    return st.name.empty() ? nullptr : copy(st.name);
}

char *haul_torrent_error(haul_torrent_session *s, uint64_t key) {
    auto *handle = find(s, key);
    if (handle == nullptr) return nullptr;
    lt::torrent_status st = handle->status({});
    if (!st.errc) return nullptr;
    std::string file = st.error_file >= lt::file_index_t(0) && st.has_metadata
                           ? handle->torrent_file()->files().file_path(st.error_file)
                           : "";
    return copy(st.errc.message() + (file.empty() ? "" : ": " + file));
}

void *haul_torrent_metadata(haul_torrent_session *s, uint64_t key, size_t *length) {
    *length = 0;
    auto *handle = find(s, key);
    if (handle == nullptr) return nullptr;
    auto ti = handle->torrent_file();
    if (!ti) return nullptr;
    std::vector<char> out;
    lt::bencode(std::back_inserter(out), lt::create_torrent(*ti).generate());
    void *copyOut = std::malloc(out.size());
    if (copyOut == nullptr) return nullptr;
    std::memcpy(copyOut, out.data(), out.size());
    *length = out.size();
    return copyOut;
}

int haul_torrent_file_count(haul_torrent_session *s, uint64_t key) {
    auto *handle = find(s, key);
    if (handle == nullptr) return -1;
    auto ti = handle->torrent_file();
    return ti ? ti->num_files() : -1;
}

int haul_torrent_file(haul_torrent_session *s, uint64_t key, int index, char **path, int64_t *size, int *pad) {
    *path = nullptr;
    auto *handle = find(s, key);
    if (handle == nullptr) return -1;
    auto ti = handle->torrent_file();
    if (!ti || index < 0 || index >= ti->num_files()) return -1;
    auto const &files = ti->files();
    lt::file_index_t file(index);
    *path = copy(files.file_path(file));
    *size = files.file_size(file);
    *pad = files.pad_file_at(file) ? 1 : 0;
    return 0;
}

int haul_torrent_file_progress(haul_torrent_session *s, uint64_t key, int64_t *done, int count) {
    auto *handle = find(s, key);
    if (handle == nullptr) return 0;
    std::vector<int64_t> progress = handle->file_progress(lt::torrent_handle::piece_granularity);
    int n = std::min(count, int(progress.size()));
    for (int i = 0; i < n; ++i) done[i] = progress[size_t(i)];
    return n;
}

int haul_torrent_pop(haul_torrent_session *s, haul_torrent_event *events, int capacity) {
    if (s->events.empty()) {
        std::vector<lt::alert *> alerts;
        s->session->pop_alerts(&alerts);
        for (auto *alert : alerts) translate(s, alert);
    }
    int n = 0;
    while (n < capacity && !s->events.empty()) {
        events[n++] = s->events.front();
        s->events.pop_front();
    }
    return n;
}

}  // extern "C"
