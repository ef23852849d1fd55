# Installs hwk on Windows from a release: downloads the zip for this CPU and
# the release's checksums.txt, checks the zip's SHA-256 against it (and
# installs nothing when they differ), then puts hwk.exe, and the Windows
# node programs in windows-amd64\, into the install directory.
#
#   irm https://raw.githubusercontent.com/hwk-dev/hwk/main/install.ps1 | iex
#   & ([scriptblock]::Create((irm .../install.ps1))) -Version v0.1.0
#
# -Dir defaults to $env:LOCALAPPDATA\hwk\bin; HWK_RELEASE_URL moves the
# releases (default https://github.com/hwk-dev/hwk/releases).
param(
    [string]$Version = 'latest',
    [string]$Dir = (Microsoft.PowerShell.Management\Join-Path $env:LOCALAPPDATA 'hwk\bin')
)
$ErrorActionPreference = 'Stop'
$ProgressPreference = 'SilentlyContinue'
$releases = if ($env:HWK_RELEASE_URL) { $env:HWK_RELEASE_URL } else { 'https://github.com/hwk-dev/hwk/releases' }

$arch = switch ($env:PROCESSOR_ARCHITECTURE) {
    'AMD64' { 'amd64' }
    'ARM64' { 'arm64' }
    default { throw "install.ps1: $($env:PROCESSOR_ARCHITECTURE) is not a CPU hwk has a release for (amd64, arm64)" }
}
if ($Version -eq 'latest') {
    # The latest release's page redirects to its tag.
    $page = Microsoft.PowerShell.Utility\Invoke-WebRequest -Uri "$releases/latest" -UseBasicParsing
    $Version = ($page.BaseResponse.ResponseUri.AbsolutePath -split '/')[-1]
}
if (-not $Version.StartsWith('v')) { throw "install.ps1: version $Version is not a release tag (like v0.1.0)" }

$zip = "hwk_$($Version.Substring(1))_windows_$arch.zip"
$tmp = Microsoft.PowerShell.Management\Join-Path ([IO.Path]::GetTempPath()) ([IO.Path]::GetRandomFileName())
Microsoft.PowerShell.Management\New-Item -ItemType Directory -Path $tmp | Microsoft.PowerShell.Core\Out-Null
try {
    Microsoft.PowerShell.Utility\Write-Output "Downloading $zip ($Version)..."
    Microsoft.PowerShell.Utility\Invoke-WebRequest -Uri "$releases/download/$Version/$zip" -OutFile "$tmp\$zip" -UseBasicParsing
    Microsoft.PowerShell.Utility\Invoke-WebRequest -Uri "$releases/download/$Version/checksums.txt" -OutFile "$tmp\checksums.txt" -UseBasicParsing

    $want = $null
    foreach ($line in Microsoft.PowerShell.Management\Get-Content -LiteralPath "$tmp\checksums.txt") {
        $fields = $line -split '\s+'
        if ($fields.Count -eq 2 -and $fields[1] -eq $zip) { $want = $fields[0].ToLowerInvariant() }
    }
    if (-not $want) { throw "install.ps1: checksums.txt of $Version does not list $zip; nothing was installed" }
    $got = (Microsoft.PowerShell.Utility\Get-FileHash -Algorithm SHA256 -LiteralPath "$tmp\$zip").Hash.ToLowerInvariant()
    if ($got -ne $want) { throw "install.ps1: $zip has SHA-256 $got, but checksums.txt says ${want}: the download is corrupt or was tampered with; nothing was installed" }

    Microsoft.PowerShell.Archive\Expand-Archive -LiteralPath "$tmp\$zip" -DestinationPath "$tmp\x"
    Microsoft.PowerShell.Management\New-Item -ItemType Directory -Force -Path "$Dir\windows-amd64" | Microsoft.PowerShell.Core\Out-Null
    Microsoft.PowerShell.Management\Copy-Item -Force -LiteralPath "$tmp\x\hwk.exe" -Destination $Dir
    Microsoft.PowerShell.Management\Copy-Item -Force -Path "$tmp\x\windows-amd64\*" -Destination "$Dir\windows-amd64"
    Microsoft.PowerShell.Utility\Write-Output "Installed hwk $Version in $Dir (checksum verified)."
    $userPath = [Environment]::GetEnvironmentVariable('Path', 'User')
    if (($userPath -split ';') -notcontains $Dir) {
        Microsoft.PowerShell.Utility\Write-Output "Add it to PATH: [Environment]::SetEnvironmentVariable('Path', `"$Dir;`$([Environment]::GetEnvironmentVariable('Path', 'User'))`", 'User')"
    }
} finally {
    Microsoft.PowerShell.Management\Remove-Item -Recurse -Force -LiteralPath $tmp -ErrorAction SilentlyContinue
}
