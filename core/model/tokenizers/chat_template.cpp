// The chat format: reading a model's chat template, recognising its format and rendering one user
// turn (after an optional system turn) with the assistant's opening. See chat_template.h and
// docs/generation.md#chat-format.
//
// Recognition works on a canonical form of the template: the raw text between tags must vanish
// under Hugging Face's whitespace rules (trim_blocks, lstrip_blocks and the '-' markers), so the
// output comes from the {{ }} expressions alone; inside the tags whitespace outside string
// literals is dropped, literals are re-quoted with single quotes and their escapes normalised,
// and `message.x` is written `message['x']`. Each format is then a set of exact expressions in
// that form; anything else is refused.
#include "attnviz/model/tokenizers/chat_template.h"

#include "attnviz/engine/tensor.h"
#include "attnviz/formats/fileio.h"
#include "attnviz/formats/gguf.h"
#include "attnviz/model/model.h"
#include "attnviz/model/tokenizers/tokenizer.h"

#include <nlohmann/json.hpp>

#include <ctime>
#include <filesystem>
#include <regex>

namespace attnviz {

namespace fs = std::filesystem;

namespace {

// ---- Reading the template

// bos_token / eos_token in tokenizer_config.json or special_tokens_map.json: a string, an
// added-token object {"content": ...}, or null.
std::optional<std::string> tokenText(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return std::nullopt;
  const nlohmann::json& v = j[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return std::string();  // null: the tokenizer has none
}

nlohmann::json parseJsonFile(const std::string& path) {
  try {
    return nlohmann::json::parse(readFile(path));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": not valid JSON (" + e.what() + ")");
  }
}

// ---- The canonical form

struct Tag {
  char kind = 0;            // '{' expression, '%' statement, '#' comment
  bool trimLeft = false;    // {{- {%- {#-
  bool trimRight = false;   // -}} -%} -#}
  bool plusLeft = false;    // {%+ (no lstrip)
  std::string body;         // between the delimiters and the markers
};

struct Parsed {
  std::vector<std::string> raw;  // raw[i] precedes tags[i]; raw.back() follows the last tag
  std::vector<Tag> tags;
};

bool parseTemplate(const std::string& s, Parsed& out) {
  std::size_t i = 0;
  std::string raw;
  while (i < s.size()) {
    if (s[i] == '{' && i + 1 < s.size() && (s[i + 1] == '{' || s[i + 1] == '%' || s[i + 1] == '#')) {
      Tag t;
      t.kind = s[i + 1];
      std::size_t j = i + 2;
      if (j < s.size() && s[j] == '-') t.trimLeft = true, ++j;
      else if (j < s.size() && s[j] == '+') t.plusLeft = true, ++j;
      const char close = t.kind == '{' ? '}' : t.kind;
      std::size_t k = j;
      bool found = false;
      while (k < s.size()) {
        if (t.kind != '#' && (s[k] == '\'' || s[k] == '"')) {  // skip a string literal
          const char q = s[k++];
          while (k < s.size() && s[k] != q) k += s[k] == '\\' ? 2 : 1;
          ++k;
          continue;
        }
        if (s[k] == close && k + 1 < s.size() && s[k + 1] == '}') {
          found = true;
          break;
        }
        ++k;
      }
      if (!found) return false;
      std::size_t end = k;
      if (end > j && s[end - 1] == '-') t.trimRight = true, --end;
      t.body = s.substr(j, end - j);
      out.raw.push_back(raw);
      raw.clear();
      out.tags.push_back(std::move(t));
      i = k + 2;
      continue;
    }
    raw += s[i++];
  }
  out.raw.push_back(raw);
  return true;
}

bool isWs(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// What survives of raw text between `prev` and `next` (either may be null) under
// trim_blocks=True, lstrip_blocks=True and the '-' markers.
std::string survivingRaw(std::string r, const Tag* prev, const Tag* next) {
  bool startsLine = prev == nullptr;  // does r begin at the start of a line of the template?
  if (prev && prev->trimRight) {
    std::size_t a = 0;
    while (a < r.size() && isWs(r[a])) ++a;
    r.erase(0, a);
  } else if (prev && prev->kind != '{') {  // trim_blocks: the first newline after a block tag
    if (r.rfind("\r\n", 0) == 0) r.erase(0, 2), startsLine = true;
    else if (!r.empty() && r[0] == '\n') r.erase(0, 1), startsLine = true;
  }
  if (next && next->trimLeft) {
    while (!r.empty() && isWs(r.back())) r.pop_back();
  } else if (next && next->kind != '{' && !next->plusLeft) {  // lstrip_blocks
    std::size_t b = r.size();
    while (b > 0 && (r[b - 1] == ' ' || r[b - 1] == '\t')) --b;
    if (b > 0 ? r[b - 1] == '\n' : startsLine) r.erase(b);
  }
  return r;
}

// The code of a tag with whitespace outside literals removed and literals re-quoted.
bool canonicalCode(const std::string& body, std::string& out) {
  std::size_t i = 0;
  while (i < body.size()) {
    const char c = body[i];
    if (c == '\'' || c == '"') {
      std::string lit;
      ++i;
      while (i < body.size() && body[i] != c) {
        if (body[i] == '\\' && i + 1 < body.size()) {
          const char e = body[i + 1];
          switch (e) {
            case 'n': lit += '\n'; break;
            case 't': lit += '\t'; break;
            case 'r': lit += '\r'; break;
            case '\\': lit += '\\'; break;
            case '\'': lit += '\''; break;
            case '"': lit += '"'; break;
            default: lit += '\\', lit += e; break;
          }
          i += 2;
          continue;
        }
        lit += body[i++];
      }
      if (i >= body.size()) return false;
      ++i;
      out += '\'';
      for (char ch : lit) {
        if (ch == '\n') out += "\\n";
        else if (ch == '\t') out += "\\t";
        else if (ch == '\r') out += "\\r";
        else if (ch == '\\') out += "\\\\";
        else if (ch == '\'') out += "\\'";
        else out += ch;
      }
      out += '\'';
      continue;
    }
    if (!isWs(c)) out += c;
    ++i;
  }
  return true;
}

void replaceAll(std::string& s, const std::string& from, const std::string& to) {
  for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
}

// The canonical form, or nullopt when raw text survives (output the expressions do not make) or
// a tag is not closed.
std::optional<std::string> canonicalTemplate(const std::string& text) {
  Parsed p;
  if (!parseTemplate(text, p)) return std::nullopt;
  for (std::size_t i = 0; i < p.raw.size(); ++i) {
    const Tag* prev = i > 0 ? &p.tags[i - 1] : nullptr;
    const Tag* next = i < p.tags.size() ? &p.tags[i] : nullptr;
    if (!survivingRaw(p.raw[i], prev, next).empty()) return std::nullopt;
  }
  std::string c;
  for (const Tag& t : p.tags) {
    if (t.kind == '#') continue;
    c += t.kind == '{' ? "{{" : "{%";
    if (t.trimLeft) c += '-';
    if (!canonicalCode(t.body, c)) return std::nullopt;
    if (t.trimRight) c += '-';
    c += t.kind == '{' ? "}}" : "%}";
  }
  for (const char* f : {"content", "role"})
    replaceAll(c, std::string("message.") + f, std::string("message['") + f + "']");
  return c;
}

// ---- Rendering helpers

// Python's str.strip() (Jinja's trim): Unicode whitespace at both ends.
std::size_t wsLenAt(const std::string& s, std::size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) return 1;
  auto at = [&](std::size_t k) { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0; };
  if (c == 0xC2 && (at(i + 1) == 0x85 || at(i + 1) == 0xA0)) return 2;
  if (c == 0xE1 && at(i + 1) == 0x9A && at(i + 2) == 0x80) return 3;  // U+1680
  if (c == 0xE2 && at(i + 1) == 0x80) {
    const unsigned char d = at(i + 2);
    if ((d >= 0x80 && d <= 0x8A) || d == 0xA8 || d == 0xA9 || d == 0xAF) return 3;
  }
  if (c == 0xE2 && at(i + 1) == 0x81 && at(i + 2) == 0x9F) return 3;  // U+205F
  if (c == 0xE3 && at(i + 1) == 0x80 && at(i + 2) == 0x80) return 3;  // U+3000
  return 0;
}

std::string pyStrip(const std::string& s) {
  std::size_t a = 0;
  while (a < s.size()) {
    const std::size_t n = wsLenAt(s, a);
    if (!n) break;
    a += n;
  }
  // From the end: find the last position that does not start a whitespace run to the end.
  std::size_t b = s.size();
  while (b > a) {
    std::size_t start = b - 1;
    while (start > a && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    const std::size_t n = wsLenAt(s, start);
    if (n == 0 || start + n != b) break;
    b = start;
  }
  return s.substr(a, b - a);
}

std::string unescapeLiteral(const std::string& canon) {
  std::string out;
  for (std::size_t i = 0; i < canon.size(); ++i) {
    if (canon[i] == '\\' && i + 1 < canon.size()) {
      const char e = canon[++i];
      out += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
    } else {
      out += canon[i];
    }
  }
  return out;
}

bool has(const std::string& c, const std::string& frag) { return c.find(frag) != std::string::npos; }

const char* kFormats = "llama2, llama3, mistral, chatml, gemma, phi3, olmo2";

[[noreturn]] void notRecognised(const ChatTemplate& t) {
  throw InputError(t.file + ": chat template not recognised (known: " + kFormats + ")");
}

[[noreturn]] void refusesSystem(const ChatTemplate& t, const std::string& why) {
  throw InputError(t.file + ": --system: this chat template refuses a system turn (" + why + ")");
}

struct Rendered {
  std::string format;
  std::string text;
};

// The template's output for [system?, user] with add_generation_prompt=True; `render` false only
// names the format. Throws InputError as renderChat says.
Rendered recognise(const ChatTemplate& t, const ChatTurns* turns) {
  const std::optional<std::string> canon = canonicalTemplate(t.text);
  if (!canon) notRecognised(t);
  const std::string& c = *canon;
  const bool bosWritten = has(c, "{{bos_token}}") || has(c, "{{-bos_token}}") ||
                          has(c, "{{bos_token-}}") || has(c, "{{-bos_token-}}");
  const std::string bos = bosWritten ? t.bosToken : "";
  const bool sys = turns && turns->system.has_value();
  const std::string user = turns ? turns->user : "";
  const std::string system = sys ? *turns->system : "";
  Rendered r;

  // ---- Llama 2: [INST] with a <<SYS>> block folded into the first user turn, stripped.
  if (has(c, "<<SYS>>")) {
    if (!has(c, "{{bos_token+'[INST] '+content.strip()+' [/INST]'}}") ||
        !has(c, "setcontent='<<SYS>>\\n'+system_message+'\\n<</SYS>>\\n\\n'+message['content']"))
      notRecognised(t);
    r.format = "llama2";
    const std::string content =
        sys ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + user : user;
    r.text = t.bosToken + "[INST] " + pyStrip(content) + " [/INST]";
    return r;
  }

  // ---- Llama 3: header ids around each role, <|eot_id|> after each turn.
  if (has(c, "<|start_header_id|>")) {
    const std::string turn = "'<|start_header_id|>'+message['role']+'<|end_header_id|>\\n\\n'+"
                             "message['content']|trim+'<|eot_id|>'";
    const std::string gen = "'<|start_header_id|>assistant<|end_header_id|>\\n\\n'";
    if (!has(c, turn) || !has(c, gen)) notRecognised(t);
    r.format = "llama3";
    if (has(c, "CuttingKnowledgeDate") || has(c, "Cutting Knowledge Date")) {
      // 3.1 and later: a system turn always, dated; the user's system text after the dates.
      if (!bosWritten || !has(c, "{{-'Cutting Knowledge Date: December 2023\\n'}}") ||
          !has(c, "{{-'Today Date: '+date_string+'\\n\\n'}}") ||
          !has(c, "{{-'<|start_header_id|>system<|end_header_id|>\\n\\n'}}") ||
          !has(c, "setsystem_message=messages[0]['content']|trim") ||
          !has(c, "{{-system_message}}{{-'<|eot_id|>'}}"))
        notRecognised(t);
      std::string date;
      if (has(c, "strftime_now")) {
        // Hugging Face defines strftime_now, so the template takes today's date.
        if (!has(c, "{%-setdate_string=strftime_now('%d %b %Y')%}")) notRecognised(t);
        date = chatTodayDate();
      } else {
        static const std::regex lit(R"(setdate_string='([^'\\]*)')");
        std::smatch m;
        if (!std::regex_search(c, m, lit)) notRecognised(t);
        date = m[1].str();
      }
      r.text = t.bosToken + "<|start_header_id|>system<|end_header_id|>\n\n" +
               "Cutting Knowledge Date: December 2023\n" + "Today Date: " + date + "\n\n" +
               pyStrip(system) + "<|eot_id|>";
    } else {
      // 3.0: BOS before the first turn, then each turn as it comes.
      if (!has(c, "{%setcontent=" + turn + "%}") ||
          !has(c, "{%ifloop.index0==0%}{%setcontent=bos_token+content%}"))
        notRecognised(t);
      r.text = t.bosToken;
      if (sys)
        r.text += "<|start_header_id|>system<|end_header_id|>\n\n" + pyStrip(system) + "<|eot_id|>";
    }
    r.text += "<|start_header_id|>user<|end_header_id|>\n\n" + pyStrip(user) + "<|eot_id|>" +
              "<|start_header_id|>assistant<|end_header_id|>\n\n";
    return r;
  }

  // ---- Mistral: [INST] ... [/INST], the system text before the user's.
  if (has(c, "[INST]")) {
    if (!bosWritten) notRecognised(t);
    static const std::regex userRe(R"('((?:[^'\\]|\\.)*\[INST\](?:[^'\\]|\\.)*)'\+message\['content'\]\+'((?:[^'\\]|\\.)*\[/INST\](?:[^'\\]|\\.)*)')");
    static const std::regex sysRe(R"('((?:[^'\\]|\\.)*\[INST\](?:[^'\\]|\\.)*)'\+system_message\+'((?:[^'\\]|\\.)*)'\+message\['content'\]\+'((?:[^'\\]|\\.)*\[/INST\](?:[^'\\]|\\.)*)')");
    std::smatch mu, ms;
    if (!std::regex_search(c, mu, userRe)) notRecognised(t);
    const bool sysKnown = std::regex_search(c, ms, sysRe);
    r.format = "mistral";
    if (sys) {
      if (!sysKnown) {
        if (has(c, "system")) notRecognised(t);
        refusesSystem(t, "its roles must alternate user/assistant");
      }
      r.text = bos + unescapeLiteral(ms[1].str()) + system + unescapeLiteral(ms[2].str()) + user +
               unescapeLiteral(ms[3].str());
    } else {
      r.text = bos + unescapeLiteral(mu[1].str()) + user + unescapeLiteral(mu[2].str());
    }
    return r;
  }

  // ---- ChatML: <|im_start|>role\n ... <|im_end|>\n, with the template's default system turn.
  if (has(c, "<|im_start|>")) {
    if (has(c, "<think>") || has(c, "enable_thinking") || has(c, "reasoning_content") ||
        has(c, "bos_token"))
      notRecognised(t);
    if (!has(c, "'<|im_start|>'+message['role']+'\\n'+message['content']+'<|im_end|>'+'\\n'") &&
        !has(c, "'<|im_start|>'+message['role']+'\\n'+message['content']+'<|im_end|>\\n'"))
      notRecognised(t);
    if (!has(c, "'<|im_start|>assistant\\n'")) notRecognised(t);
    r.format = "chatml";
    std::optional<std::string> sysText;
    if (sys) {
      sysText = system;
    } else {
      static const std::regex def(R"('<\|im_start\|>system\\n((?:[^'\\]|\\.)*)<\|im_end\|>\\n')");
      std::smatch m;
      if (std::regex_search(c, m, def)) sysText = unescapeLiteral(m[1].str());
    }
    if (sysText) r.text += "<|im_start|>system\n" + *sysText + "<|im_end|>\n";
    r.text += "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n";
    return r;
  }

  // ---- Gemma: <start_of_turn>user\n ... <end_of_turn>\n<start_of_turn>model\n.
  if (has(c, "<start_of_turn>")) {
    if (!has(c, "'<start_of_turn>model\\n'")) notRecognised(t);
    r.format = "gemma";
    if (has(c, "first_user_prefix")) {  // Gemma 3: the system text opens the first user turn
      if (!has(c, "setfirst_user_prefix=messages[0]['content']+'\\n\\n'") ||
          !has(c, "{{'<start_of_turn>'+role+'\\n'+(first_user_prefixifloop.firstelse'')}}") ||
          !has(c, "{{message['content']|trim}}") || !has(c, "{{'<end_of_turn>\\n'}}"))
        notRecognised(t);
      r.text = bos + "<start_of_turn>user\n" + (sys ? system + "\n\n" : "") + pyStrip(user) +
               "<end_of_turn>\n<start_of_turn>model\n";
      return r;
    }
    if (!has(c, "'<start_of_turn>'+role+'\\n'+message['content']|trim+'<end_of_turn>\\n'"))
      notRecognised(t);
    if (sys) {
      if (has(c, "raise_exception('System role not supported')"))
        refusesSystem(t, "it raises 'System role not supported'");
      notRecognised(t);
    }
    r.text = bos + "<start_of_turn>user\n" + pyStrip(user) + "<end_of_turn>\n<start_of_turn>model\n";
    return r;
  }

  // ---- Phi-3: <|role|>\n ... <|end|>\n, then <|assistant|>\n.
  if (has(c, "<|end|>")) {
    const bool perRole = has(c, "'<|system|>\\n'+message['content']+'<|end|>\\n'") &&
                         has(c, "'<|user|>\\n'+message['content']+'<|end|>\\n'");
    const bool generic = has(c, "'<|'+message['role']+'|>'+'\\n'+message['content']+'<|end|>\\n'");
    if ((!perRole && !generic) || !has(c, "{%ifadd_generation_prompt%}{{'<|assistant|>\\n'}}"))
      notRecognised(t);
    r.format = "phi3";
    // Phi-3.5 skips an empty system message.
    const bool skipEmpty = has(c, "message['role']=='system'andmessage['content']");
    if (sys && !(skipEmpty && system.empty())) r.text = "<|system|>\n" + system + "<|end|>\n";
    r.text = bos + r.text + "<|user|>\n" + user + "<|end|>\n<|assistant|>\n";
    return r;
  }

  // ---- OLMo 2 (Tülu's format): <|role|>\n ... \n, then <|assistant|>\n.
  if (has(c, "<|user|>")) {
    if (!has(c, "'<|system|>\\n'+message['content']+'\\n'") ||
        !has(c, "'<|user|>\\n'+message['content']+'\\n'") ||
        !has(c, "{%ifloop.lastandadd_generation_prompt%}{{'<|assistant|>\\n'}}"))
      notRecognised(t);
    r.format = "olmo2";
    r.text = bos + (sys ? "<|system|>\n" + system + "\n" : "") + "<|user|>\n" + user + "\n" +
             "<|assistant|>\n";
    return r;
  }
  notRecognised(t);
}

}  // namespace

std::string knownChatFormats() { return kFormats; }

ChatTemplate readFolderChatTemplate(const std::string& dir) {
  const fs::path d(dir);
  const std::string config = (d / "tokenizer_config.json").string();
  const std::string jinja = (d / "chat_template.jinja").string();
  std::error_code ec;
  ChatTemplate t;
  nlohmann::json j;
  if (fs::exists(config, ec)) j = parseJsonFile(config);
  if (fs::exists(jinja, ec)) {  // transformers saves the template beside the config (preferred)
    t.file = jinja;
    t.text = readFile(jinja);
  } else if (j.is_object() && j.contains("chat_template") && !j["chat_template"].is_null()) {
    t.file = config;
    const nlohmann::json& ct = j["chat_template"];
    if (ct.is_string()) {
      t.text = ct.get<std::string>();
    } else if (ct.is_array()) {
      bool found = false;
      for (const nlohmann::json& e : ct) {
        if (e.is_object() && e.value("name", std::string()) == "default" && e.contains("template") &&
            e["template"].is_string()) {
          t.text = e["template"].get<std::string>();
          found = true;
        }
      }
      if (!found) throw InputError(config + ": --chat: chat_template has no template named \"default\"");
    } else {
      throw InputError(config + ": chat_template: expected a string or a list of {name, template}");
    }
  } else {
    throw InputError(config + ": --chat: no chat_template");
  }
  std::optional<std::string> bos = tokenText(j, "bos_token"), eos = tokenText(j, "eos_token");
  const fs::path map = d / "special_tokens_map.json";
  if ((!bos || !eos) && fs::exists(map, ec)) {
    const nlohmann::json m = parseJsonFile(map.string());
    if (!bos) bos = tokenText(m, "bos_token");
    if (!eos) eos = tokenText(m, "eos_token");
  }
  t.bosToken = bos.value_or("");
  t.eosToken = eos.value_or("");
  return t;
}

ChatTemplate readGgufChatTemplate(const GgufFile& file) {
  ChatTemplate t;
  t.file = file.path();
  std::optional<std::string> text;
  try {
    text = file.getString("tokenizer.chat_template");
  } catch (const InputError&) {
    throw InputError(file.path() + ": tokenizer.chat_template: expected a string");
  }
  if (!text) throw InputError(file.path() + ": --chat: no tokenizer.chat_template");
  t.text = *text;
  std::optional<std::vector<std::string>> tokens;
  try {
    tokens = file.getStringArray("tokenizer.ggml.tokens");
  } catch (const InputError&) {
  }
  auto piece = [&](const char* key) -> std::string {
    std::optional<std::int64_t> id;
    try {
      id = file.getInt(key);
    } catch (const InputError&) {
    }
    if (!id || !tokens || *id < 0 || *id >= std::int64_t(tokens->size())) return "";
    return (*tokens)[std::size_t(*id)];
  };
  t.bosToken = piece("tokenizer.ggml.bos_token_id");
  t.eosToken = piece("tokenizer.ggml.eos_token_id");
  return t;
}

ChatTemplate loadChatTemplate(const std::string& modelPath) {
  return loadChatTemplate(locateModelFiles(modelPath, false));
}

ChatTemplate loadChatTemplate(const ModelFiles& f) {
  if (!f.gguf.empty()) {
    const auto file = GgufFile::open(f.gguf);
    return readGgufChatTemplate(*file);
  }
  return readFolderChatTemplate(f.dir);
}

std::string chatFormatOf(const ChatTemplate& t) { return recognise(t, nullptr).format; }

std::string renderChat(const ChatTemplate& t, const ChatTurns& turns) {
  return recognise(t, &turns).text;
}

std::vector<int> encodeChat(const Tokenizer& tok, const ChatTemplate& t, const ChatTurns& turns) {
  if (!tok.parseSpecial())
    throw UsageError("--chat: the chat format's special tokens must be parsed (drop --no-parse-special)");
  return tok.encode(renderChat(t, turns), false);
}

std::vector<int> encodeModelChat(const Model& model, const ChatTurns& turns) {
  const std::vector<int> ids = encodeChat(model.tokenizer(), loadChatTemplate(model.files()), turns);
  model.checkIds(ids);
  return ids;
}

std::string chatTodayDate() {
  static const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02d %s %04d", tm.tm_mday, kMonths[tm.tm_mon], tm.tm_year + 1900);
  return buf;
}

}  // namespace attnviz
