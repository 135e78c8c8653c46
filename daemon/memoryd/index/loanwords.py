"""Katakana loanwords of software work and the English words they stand for.

Japanese developers write many English terms in katakana (ログイン, リダイレクト) and as often in English
("login 後に redirect"), in the same sentence or the next brief. Character bigrams cannot match the two
spellings, and on a small board the embedding model alone does not tell them apart from a brief that shares
one word, so a katakana run that is made entirely of words below also yields their English terms
(``ログインボタン`` -> ``login``, ``button``), in records and queries alike. A run with any other part
(``コンテスト``, contest, holds テスト) yields none: a partial match would invent words.

A key is matched with or without its trailing long-vowel mark (ユーザー and ユーザ). A query asks for the
English word once per bigram of its katakana (ログイン: three times), so a record spelling it in English
weighs as one spelling it in katakana: a query term asked twice counts twice in BM25.
"""

from __future__ import annotations

from functools import lru_cache

# fmt: off
_TABLE = {
    "ログイン": "login", "ログアウト": "logout", "サインイン": "sign-in", "サインアウト": "sign-out",
    "サインアップ": "signup", "リダイレクト": "redirect", "ボタン": "button", "セッション": "session",
    "エラー": "error", "キャッシュ": "cache", "デプロイ": "deploy", "テスト": "test", "ページ": "page",
    "ユーザー": "user", "パスワード": "password", "アカウント": "account", "サーバー": "server",
    "クライアント": "client", "クッキー": "cookie", "トークン": "token", "リクエスト": "request",
    "レスポンス": "response", "データベース": "database", "データ": "data", "バグ": "bug",
    "クラッシュ": "crash", "タイムアウト": "timeout", "リトライ": "retry", "キュー": "queue", "ジョブ": "job",
    "ビルド": "build", "リリース": "release", "バージョン": "version", "アップデート": "update",
    "アップグレード": "upgrade", "インストール": "install", "ダウンロード": "download",
    "アップロード": "upload", "ファイル": "file", "フォルダー": "folder", "リンク": "link", "メニュー": "menu",
    "フォーム": "form", "フォント": "font", "アイコン": "icon", "テーマ": "theme", "ダーク": "dark",
    "カラー": "color", "レイアウト": "layout", "スクロール": "scroll", "モーダル": "modal",
    "ダイアログ": "dialog", "ポップアップ": "popup", "プッシュ": "push", "メール": "email",
    "メッセージ": "message", "チェックアウト": "checkout", "カート": "cart", "ペイメント": "payment",
    "リファンド": "refund", "サブスクリプション": "subscription", "インボイス": "invoice", "クーポン": "coupon",
    "ウェブフック": "webhook", "フック": "hook", "イベント": "event", "ログ": "log", "メトリクス": "metrics",
    "アラート": "alert", "ダッシュボード": "dashboard", "モニタリング": "monitoring",
    "パフォーマンス": "performance", "メモリー": "memory", "リーク": "leak", "レイテンシー": "latency",
    "スキーマ": "schema", "マイグレーション": "migration", "インデックス": "index", "クエリー": "query",
    "テーブル": "table", "カラム": "column", "バックアップ": "backup", "コンテナー": "container",
    "クラスター": "cluster", "ノード": "node", "ネットワーク": "network",
    "プロキシー": "proxy", "ドメイン": "domain", "ファイアウォール": "firewall", "パイプライン": "pipeline",
    "ワークフロー": "workflow", "スクリプト": "script", "コマンド": "command", "オプション": "option",
    "フラグ": "flag", "コンフィグ": "config", "パラメーター": "parameter", "メソッド": "method",
    "モジュール": "module", "パッケージ": "package", "ライブラリー": "library", "フレームワーク": "framework",
    "プラグイン": "plugin", "コンポーネント": "component", "エンドポイント": "endpoint",
    "ミドルウェア": "middleware", "ハンドラー": "handler", "コールバック": "callback", "スレッド": "thread",
    "プロセス": "process", "タスク": "task", "スケジュール": "schedule", "バッチ": "batch",
    "ストリーム": "stream", "バッファー": "buffer", "エンコード": "encode", "デコード": "decode",
    "フォーマット": "format", "パーサー": "parser", "バリデーション": "validation", "レビュー": "review",
    "マージ": "merge", "ブランチ": "branch", "コミット": "commit", "リポジトリ": "repository",
    "ドキュメント": "docs", "サイト": "site", "サイトマップ": "sitemap", "アンカー": "anchor",
    "モバイル": "mobile", "アプリ": "app", "ブラウザー": "browser", "キーボード": "keyboard",
    "スクリーン": "screen", "スクリーンショット": "screenshot", "オフライン": "offline", "オンライン": "online",
    "オンボーディング": "onboarding", "フィルター": "filter", "サーチ": "search", "ソート": "sort",
    "アクセス": "access", "パーミッション": "permission", "ハッシュ": "hash", "シークレット": "secret",
    "キー": "key", "ストレージ": "storage", "バケット": "bucket", "タイムゾーン": "timezone",
    "タイムスタンプ": "timestamp", "カレンダー": "calendar", "ロケール": "locale", "インポート": "import",
    "エクスポート": "export", "バックエンド": "backend", "フロントエンド": "frontend", "サービス": "service",
    "ヘルスチェック": "healthcheck", "ステージング": "staging", "ロールバック": "rollback",
    "ループ": "loop", "リロード": "reload", "リフレッシュ": "refresh", "クリック": "click", "タップ": "tap",
    "ナビゲーション": "navigation", "ヘッダー": "header", "フッター": "footer", "サイドバー": "sidebar",
    "タブ": "tab", "ウィンドウ": "window", "アニメーション": "animation", "バンドル": "bundle",
    "プレビュー": "preview", "ステータス": "status", "エディター": "editor", "ターミナル": "terminal",
    "ディレクトリ": "directory", "テンプレート": "template", "レポート": "report", "チケット": "ticket",
    "ラベル": "label", "コメント": "comment", "ドラフト": "draft", "プロジェクト": "project",
    "レート": "rate", "リミット": "limit", "ロード": "load", "ステップ": "step", "リスト": "list",
    "マネージャー": "manager", "エンジン": "engine", "ベンダー": "vendor", "プロバイダー": "provider",
    "レジストリ": "registry", "ライセンス": "license", "ポリシー": "policy", "ルール": "rule",
    "スコア": "score", "グラフ": "graph", "チャート": "chart", "マニフェスト": "manifest",
}
# fmt: on

_WORDS: dict[str, str] = {}
for _kana, _english in _TABLE.items():
    _WORDS[_kana] = _english
    _WORDS.setdefault(_kana.rstrip("ー"), _english)
_LONGEST = max(map(len, _WORDS))


@lru_cache(maxsize=4096)
def english(run: str) -> tuple[tuple[str, int], ...]:
    """``(English word, characters of its katakana)`` for each word a katakana ``run`` is made of, in order
    (``()`` unless every part is a known word: the longest known word is taken first at each position, a
    long-vowel mark after a word belongs to it)."""
    out: list[tuple[str, int]] = []
    at = 0
    while at < len(run):
        for end in range(min(len(run), at + _LONGEST), at, -1):
            word = _WORDS.get(run[at:end])
            if word is not None:
                start, at = at, end
                while at < len(run) and run[at] == "ー":
                    at += 1
                out.append((word, at - start))
                break
        else:
            return ()
    return tuple(out)
